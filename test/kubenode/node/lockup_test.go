package node

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLockup: the boot is given up on a vCPU stuck for lockupLimit seconds, not on the
// watchdog's shorter reports of a vCPU the loaded host did not run for a while.
func TestLockup(t *testing.T) {
	dir := t.TempDir()
	n := &VMNode{spec: VMSpec{Name: "n"}, ps: &procSet{dir: dir}}
	console := n.ps.LogPath("console-n")
	if err := os.MkdirAll(filepath.Dir(console), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		if err := os.WriteFile(console, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("[   92.732445] watchdog: BUG: soft lockup - CPU#0 stuck for 45s! [ip6tables:209]\n")
	if got := n.lockup(); got != "" {
		t.Errorf("a 45 s report: %q, want none", got)
	}
	write("[   92.7] watchdog: BUG: soft lockup - CPU#0 stuck for 45s! [ip6tables:209]\n" +
		"[  156.7] watchdog: BUG: soft lockup - CPU#1 stuck for 105s! [containerd:146]\n")
	if got, want := n.lockup(), "soft lockup - CPU#1 stuck for 105s! [containerd:146]"; got != want {
		t.Errorf("lockup() = %q, want %q", got, want)
	}
}
