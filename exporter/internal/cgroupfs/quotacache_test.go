//go:build linux

package cgroupfs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestQuotaCache: new directories are read at once and again on the next walk (a runtime
// writes the quota after mkdir), known ones only every QuotaRecheckEvery walks, removed ones
// are forgotten; the result always matches what the cache last read.
func TestQuotaCache(t *testing.T) {
	root := t.TempDir()
	h := &Hierarchy{Version: 2, MountPoint: root, root: "/"}
	l := &Layout{Mode: "v2", CPU: h, Memory: h}
	write := func(dir, cpuMax string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "cpu.max"), []byte(cpuMax+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var q QuotaCache
	paths := func() []string {
		t.Helper()
		cgs, errs := q.Discover(context.Background(), l, WalkOptions{})
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
	write("a", "50000 100000")
	write("b", "max 100000")
	if got := paths(); !slices.Equal(got, []string{"/a"}) {
		t.Fatalf("walk 1 = %v, want [/a]", got)
	}
	// b gets its quota right after its first walk: the second walk reads it again.
	write("b", "20000 100000")
	if got := paths(); !slices.Equal(got, []string{"/a", "/b"}) {
		t.Fatalf("walk 2 = %v, want [/a /b]", got)
	}
	// Known directories are not read again until QuotaRecheckEvery walks have passed.
	write("a", "max 100000")
	write("c", "10000 100000")
	if got := paths(); !slices.Equal(got, []string{"/a", "/b", "/c"}) {
		t.Fatalf("walk 3 = %v, want [/a /b /c] (a's quota not re-read yet)", got)
	}
	for range QuotaRecheckEvery - 2 {
		paths()
	}
	if got := paths(); !slices.Equal(got, []string{"/b", "/c"}) {
		t.Fatalf("after %d walks = %v, want [/b /c] (a re-read)", QuotaRecheckEvery, got)
	}
	// A removed directory is forgotten; one created again at the same path is new.
	if err := os.RemoveAll(filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	if got := paths(); !slices.Equal(got, []string{"/c"}) {
		t.Fatalf("after rmdir = %v, want [/c]", got)
	}
	if _, ok := q.dirs["/b"]; ok {
		t.Error("the removed /b is still cached")
	}
	write("b", "30000 100000")
	if got := paths(); !slices.Equal(got, []string{"/b", "/c"}) {
		t.Fatalf("after re-create = %v, want [/b /c]", got)
	}
}

// TestQuotaCacheLateQuota: a quota written to a known directory is picked up by a later re-check.
func TestQuotaCacheLateQuota(t *testing.T) {
	root := t.TempDir()
	h := &Hierarchy{Version: 2, MountPoint: root, root: "/"}
	l := &Layout{Mode: "v2", CPU: h, Memory: h}
	if err := os.MkdirAll(filepath.Join(root, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	var q QuotaCache
	for range QuotaRecheckEvery + 2 {
		q.Discover(context.Background(), l, WalkOptions{})
	}
	// No cpu.max yet: read (as absent) on the first two walks, so now cached as no quota.
	if err := os.WriteFile(filepath.Join(root, "a", "cpu.max"), []byte("50000 100000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	found := false
	for range QuotaRecheckEvery {
		cgs, _ := q.Discover(context.Background(), l, WalkOptions{})
		found = found || len(cgs) == 1
	}
	if !found {
		t.Error("a quota written later is never picked up")
	}
}
