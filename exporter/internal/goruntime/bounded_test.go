package goruntime

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// maxKeptPerProcess bounds what the Info of one Go process keeps, whatever its build info
// holds; maxInspectAlloc what reading it allocates.
const (
	maxKeptPerProcess = 4 << 10
	maxInspectAlloc   = 256 << 10
)

// Build info of almost 1 MiB (the cap), most of it the main module path:
// runtime/debug.ParseBuildInfo returns substrings of its input, so every Info kept the whole
// module text (240 processes of one such binary killed the exporter in a 256 MiB limit).
func TestBuildInfoKeptBounded(t *testing.T) {
	procfs := t.TempDir()
	const procs = 32
	img := testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: testutil.CraftedModuleText(1<<20 - 64)}.Bytes()
	for pid := 1; pid <= procs; pid++ {
		dir := filepath.Join(procfs, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "exe"), img, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	known := Known{Affinity: 4, Env: func() (map[string]string, error) { return nil, nil }}
	infos := make([]*Info, procs)
	var alloc uint64
	kept := testutil.Retained(func() any {
		for i := range infos {
			var err error
			n := testutil.Allocated(func() { infos[i], err = InspectKnown(context.Background(), procfs, i+1, known, CPUQuota{}) })
			if err != nil {
				t.Fatal(err)
			}
			alloc = max(alloc, n)
		}
		return infos
	})
	info := infos[0]
	t.Logf("%d processes keep %d KiB, %d bytes each (bound %d); one read allocates %d KiB (bound %d); main module %d bytes, DefaultGODEBUG %q, automaxprocs %v",
		procs, kept>>10, kept/procs, maxKeptPerProcess, alloc>>10, maxInspectAlloc>>10, len(info.MainModule), info.DefaultGODEBUG[max(0, len(info.DefaultGODEBUG)-40):], info.AutoMaxProcs)
	if kept/procs > maxKeptPerProcess {
		t.Errorf("%d bytes kept per process, bound %d", kept/procs, maxKeptPerProcess)
	}
	if alloc > maxInspectAlloc {
		t.Errorf("one read allocated %d bytes, bound %d", alloc, maxInspectAlloc)
	}
	// What the rules need survives: automaxprocs is linked in, and containermaxprocs=0 (at the
	// end of a DefaultGODEBUG longer than any cap) is seen.
	if !info.AutoMaxProcs || GODEBUGInt("containermaxprocs", 1, info.DefaultGODEBUG) != 0 {
		t.Errorf("automaxprocs %v, containermaxprocs %d: what the rules read was lost", info.AutoMaxProcs, GODEBUGInt("containermaxprocs", 1, info.DefaultGODEBUG))
	}
}
