package cgroups

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
)

func TestWalkDirs(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b/c", "a/d", "e"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"cpu.stat", "a/cgroup.procs", "a/b/memory.stat"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink to a directory is not a cgroup and must not be followed (no loops).
	if err := os.Symlink(root, filepath.Join(root, "a", "loop")); err != nil {
		t.Fatal(err)
	}
	var got []string
	walkDirs(root, func(dir string) bool {
		rel, _ := filepath.Rel(root, dir)
		got = append(got, rel)
		return true
	}, func(dir string, err error) { t.Errorf("%s: %v", dir, err) })
	sort.Strings(got)
	want := []string{".", "a", "a/b", "a/b/c", "a/d", "e"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("walk = %v, want %v", got, want)
	}
	// A vanished root is skipped silently; visit returning false stops the walk.
	n := 0
	walkDirs(filepath.Join(root, "gone"), func(string) bool { n++; return true }, func(dir string, err error) { t.Errorf("%s: %v", dir, err) })
	walkDirs(root, func(string) bool { n++; return false }, nil)
	if n != 2 {
		t.Errorf("visits = %d, want 2 (the vanished root once, then the stopped walk once)", n)
	}
}

// Paths lists the directories of the cpu and memory hierarchies, each once (v1: two hierarchies).
func TestPaths(t *testing.T) {
	const path = "/system.slice/app.service"
	for _, mode := range []fixture.Mode{fixture.V1, fixture.V2} {
		root := t.TempDir()
		if err := fixture.Write(root, mode, []fixture.Cgroup{{Path: path, QuotaUS: 150000, MemoryLimit: 256 << 20}}); err != nil {
			t.Fatal(err)
		}
		l, err := cgroupfs.ReadLayout(filepath.Join(root, "proc"), filepath.Join(root, "sys"))
		if err != nil {
			t.Fatal(err)
		}
		if ps, errs := Paths(context.Background(), l, WalkOptions{}); len(errs) != 0 || len(ps) != 2 || ps[0] != "/system.slice" || ps[1] != path {
			t.Errorf("mode %d: Paths = %q, %v", mode, ps, errs)
		}
	}
}
