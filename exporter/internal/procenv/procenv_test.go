package procenv

import (
	"bytes"
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// FuzzParse: a tenant's environ block never panics the parser nor makes it allocate more
// than the values it keeps (at most MaxValue each), and a key is only ever one that was
// asked for, with a value from the block.
func FuzzParse(f *testing.F) {
	f.Add([]byte("PATH=/bin\x00GOMAXPROCS=4\x00GODEBUG=x=1\x00"))
	f.Add([]byte("=\x00==\x00GOMAXPROCS\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got map[string]string
		testutil.AllocBound(t, 2*MaxValue+16<<10, func() { got = Parse(b, "GOMAXPROCS", "GODEBUG") })
		for k, v := range got {
			if (k != "GOMAXPROCS" && k != "GODEBUG") || !bytes.Contains(b, []byte(k+"="+v)) {
				t.Fatalf("%q=%q from %q", k, v, b)
			}
		}
	})
}

// A value longer than MaxValue is left out, as if unset; a block of a million empty entries
// costs nothing per entry.
func TestParseBounded(t *testing.T) {
	long := "GODEBUG=" + strings.Repeat("x", MaxValue+1)
	got := Parse([]byte("GODEBUG=a=1\x00"+long+"\x00GOMAXPROCS=4\x00"), "GOMAXPROCS", "GODEBUG")
	if _, ok := got["GODEBUG"]; ok || got["GOMAXPROCS"] != "4" {
		t.Errorf("got %q", got)
	}
	empty := make([]byte, 1<<20)
	// AllocBound: the count is process-wide, and it retries past the runtime's own allocations.
	testutil.AllocBound(t, 4<<10, func() { Parse(empty, "GODEBUG") })
}
