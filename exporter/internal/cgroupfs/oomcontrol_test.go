//go:build linux

package cgroupfs

import (
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

func TestParseOOMControl(t *testing.T) {
	for _, c := range []struct {
		in    string
		kills uint64
		ok    bool
		err   bool
	}{
		{"oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", 3, true, false},
		{"oom_kill_disable 0\nunder_oom 0\n", 0, false, false}, // kernels before 4.13
		{"oom_kill_disable 0\nunder_oom x\n", 0, false, true},
	} {
		kills, ok, err := parseOOMControl([]byte(c.in))
		if kills != c.kills || ok != c.ok || (err != nil) != c.err {
			t.Errorf("parseOOMControl(%q) = %d, %v, %v; want %d, %v, error %v", c.in, kills, ok, err, c.kills, c.ok, c.err)
		}
	}
}

func FuzzParseOOMControl(f *testing.F) {
	f.Add([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"))
	f.Add([]byte("oom_kill\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var kills uint64
		var ok bool
		testutil.AllocBound(t, smallParseAlloc, func() { kills, ok, _ = parseOOMControl(b) })
		if !ok && kills != 0 {
			t.Errorf("a count without an oom_kill line: %d", kills)
		}
	})
}
