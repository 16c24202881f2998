//go:build linux && amd64

package cfsstall

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// On a kernel that refuses kernel tracing (this project's development host: no kprobes,
// fentry refused with EPERM), Open fails with both reasons and leaves nothing behind; where
// it works, it attaches and closes cleanly. The stall lengths themselves are tested in the
// cgroup v2 VM (test/v2/cfsstall_test.go).
func TestOpenReportsWhyOrAttaches(t *testing.T) {
	tr, err := Open()
	if err != nil {
		t.Logf("not available here: %v", err)
		return
	}
	t.Logf("attached with %s", tr.Mode())
	if _, err := tr.Lost(); err != nil {
		t.Errorf("Lost: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := tr.Read(); err != nil {
				done <- err
				return
			}
		}
	}()
	if err := tr.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-done:
		if err != ErrClosed {
			t.Errorf("Read after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Read still blocked 5 s after Close")
	}
}

func TestParseRecord(t *testing.T) {
	b := make([]byte, 32)
	binary.LittleEndian.PutUint64(b, 4242)
	binary.LittleEndian.PutUint64(b[8:], 80e6)
	binary.LittleEndian.PutUint64(b[16:], 5e9)
	binary.LittleEndian.PutUint32(b[24:], 2)
	s, err := ParseRecord(b)
	if err != nil || s.CgroupID != 4242 || s.Duration != 80*time.Millisecond || s.End != 5*time.Second || s.RunQueues != 2 {
		t.Fatalf("got %+v, %v", s, err)
	}
	if _, err := ParseRecord(b[:31]); err == nil {
		t.Error("short record accepted")
	}
	binary.LittleEndian.PutUint64(b[16:], 1e6)
	if _, err := ParseRecord(b); err == nil {
		t.Error("a stall longer than the time since boot accepted")
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add(make([]byte, 32))
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Stall
		var err error
		testutil.AllocBound(t, 16<<10, func() { s, err = ParseRecord(b) })
		if err == nil && (s.Duration < 0 || s.End < s.Duration) {
			t.Fatalf("accepted %+v", s)
		}
	})
}
