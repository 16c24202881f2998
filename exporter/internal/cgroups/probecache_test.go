//go:build linux

package cgroups

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
)

// TestProbeCache: with WalkOptions.Cache, new directories are read at once and again on the
// next walk (a runtime writes the quota after mkdir), exported ones every walk (an in-place
// resize), the others only once older than MaxAge; removed ones are forgotten; cgroup.procs
// is read every walk.
func TestProbeCache(t *testing.T) {
	root := t.TempDir()
	l := cgroupfs.LayoutFromMounts([]cgroupfs.Mount{{FSType: "cgroup2", MountPoint: root, Root: "/"}}, root)
	write := func(dir, file, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, file), []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const maxAge = 200 * time.Millisecond
	opts := WalkOptions{Cache: &ProbeCache{MaxAge: maxAge}}
	paths := func() []string {
		t.Helper()
		d := DiscoverAll(context.Background(), l, opts)
		cgs, errs := d.Cgroups, d.Errs
		if len(errs) > 0 {
			t.Fatalf("errors: %v", errs)
		}
		var out []string
		for _, cg := range cgs {
			out = append(out, cg.Path)
		}
		slices.Sort(out)
		return out
	}
	check := func(what string, want ...string) {
		t.Helper()
		if got := paths(); !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
	write("a", "cpu.max", "50000 100000")
	write("b", "cpu.max", "max 100000")
	write("e", "cpu.max", "max 100000")
	check("walk 1", "/a")
	// b gets its quota right after its first walk: the second walk reads it again.
	write("b", "cpu.max", "20000 100000")
	check("walk 2", "/a", "/b")
	// An exported directory's limit is read every walk: a resize (here to no quota)
	// shows at once. A directory that was not exported keeps its cached quota until
	// it is older than MaxAge.
	start := time.Now()
	write("a", "cpu.max", "max 100000")
	write("c", "cpu.max", "10000 100000")
	write("e", "cpu.max", "30000 100000")
	if got := paths(); time.Since(start) < maxAge && !slices.Equal(got, []string{"/b", "/c"}) {
		t.Fatalf("walk 3: %v, want [/b /c] (a's removed quota read at once, e's new one not yet)", got)
	}
	time.Sleep(maxAge)
	check("after MaxAge", "/b", "/c", "/e")
	write("e", "cpu.max", "max 100000")
	// cgroup.procs is not cached: a process in d selects it at once.
	write("d", "cgroup.procs", "1")
	check("process in d", "/b", "/c", "/d")
	// A removed directory is forgotten; one created again at the same path is new.
	if err := os.RemoveAll(filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	paths()
	if _, ok := opts.Cache.dirs[filepath.Join(root, "b")]; ok {
		t.Error("the removed b is still cached")
	}
	write("b", "cpu.max", "30000 100000")
	if got := paths(); !slices.Contains(got, "/b") {
		t.Fatalf("after re-create: %v, want /b in it", got)
	}
}
