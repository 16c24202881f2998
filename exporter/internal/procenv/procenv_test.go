package procenv

import (
	"bytes"
	"testing"
)

// FuzzParse: a tenant's environ block never panics the parser, and a key is only ever one
// that was asked for, with a value from the block.
func FuzzParse(f *testing.F) {
	f.Add([]byte("PATH=/bin\x00GOMAXPROCS=4\x00GODEBUG=x=1\x00"))
	f.Add([]byte("=\x00==\x00GOMAXPROCS\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for k, v := range Parse(b, "GOMAXPROCS", "GODEBUG") {
			if (k != "GOMAXPROCS" && k != "GODEBUG") || !bytes.Contains(b, []byte(k+"="+v)) {
				t.Fatalf("%q=%q from %q", k, v, b)
			}
		}
	})
}
