//go:build linux

package oomwatch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/fdbudget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

const noKills = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"

// The v2 backend fed with what came and went, on a fixture tree (inotify reports writes to
// regular files as it does for the kernel's memory.events): added cgroups are watched (the
// root never), a kill written before the cgroup's removal is retained, and a cgroup the feed
// says went is retired without a kill to keep.
func TestWatchWhatCameAndWentV2(t *testing.T) {
	mnt := t.TempDir()
	l := cgroupfs.LayoutFromMounts([]cgroupfs.Mount{{FSType: "cgroup2", MountPoint: mnt, Root: "/"}}, mnt)
	for _, p := range []string{"/pod", "/pod/a", "/pod/b"} {
		if err := os.MkdirAll(filepath.Join(mnt, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mnt, p, "memory.events"), []byte(noKills), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, err := New(Config{Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cg := func(p string) cgroupid.Cgroup { return cgroupid.Cgroup{Path: p, InMemory: true} }
	w.Watch(context.Background(), []cgroupid.Cgroup{cg("/"), cg("/pod/a"), cg("/pod/b")}, nil)
	if !w.watching("/pod/a") || !w.watching("/pod/b") || w.watching("/") {
		t.Fatal("want /pod/a and /pod/b watched, the root not")
	}
	if n, u := w.Counts(); n != 2 || u != 0 {
		t.Fatalf("counts %d watched, %d unwatched; want 2 and 0", n, u)
	}
	a := filepath.Join(mnt, "pod", "a")
	if err := os.WriteFile(filepath.Join(a, "memory.events"), []byte("low 0\nhigh 0\nmax 1\noom 1\noom_kill 1\noom_group_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the backend reads the file on the event
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	everything := func(string) bool { return false }
	deadline := time.Now().Add(5 * time.Second)
	for {
		g := w.Retained().Gone(everything)
		if len(g) == 1 && g[0].Cgroup.Path == "/pod/a" && g[0].Kills == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retained %v, want /pod/a with 1 kill", g)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.Watch(context.Background(), nil, []string{"/pod/b"})
	if w.watching("/pod/b") {
		t.Error("/pod/b still watched after it went")
	}
	if g := w.Retained().Gone(everything); len(g) != 1 {
		t.Errorf("retained %v, want /pod/a only (/pod/b saw no kill)", g)
	}
	if n, u := w.Counts(); n != 0 || u != 0 {
		t.Errorf("counts %d watched, %d unwatched; want 0 and 0", n, u)
	}
}

// The v1 backend's eventfds come from the budget it shares with the throttle sampler: while
// the sampler holds all of it the cgroups are unwatched, they are watched as descriptors come
// back (each Watch tries them again), and Close returns every eventfd to the budget.
func TestEventfdsShareTheBudget(t *testing.T) {
	root := testutil.NewCgroup(t, "oomwatch", testutil.CgroupOptions{})
	l, err := cgroupfs.ReadLayout("/proc", "/sys")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Require(t, l.Memory != nil && l.Memory.Version == 1, "the memory hierarchy is not v1")
	budget := fdbudget.New(1, 0)
	w, err := New(Config{Layout: l, Descriptors: budget})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			w.Close()
		}
	}()
	var cgs []cgroupid.Cgroup
	for _, n := range []string{"a", "b"} {
		c := root.Child(n, testutil.CgroupOptions{MemoryLimit: 32 << 20})
		cgs = append(cgs, cgroupid.Cgroup{Path: c.Path, InMemory: true})
	}
	sampler := budget.TakeSpare(1)
	w.Watch(context.Background(), cgs, nil)
	if n, u := w.Counts(); n != 0 || u != 2 {
		t.Fatalf("with the budget spent: %d watched, %d unwatched; want 0 and 2", n, u)
	}
	budget.Release(sampler)
	w.Watch(context.Background(), nil, nil)
	if n, u := w.Counts(); n != 1 || u != 1 {
		t.Fatalf("with one descriptor back: %d watched, %d unwatched; want 1 and 1", n, u)
	}
	var held, waiting string
	for _, cg := range cgs {
		if w.watching(cg.Path) {
			held = cg.Path
		} else {
			waiting = cg.Path
		}
	}
	w.Watch(context.Background(), nil, []string{held}) // its eventfd goes back to the budget
	w.Watch(context.Background(), nil, nil)
	if !w.watching(waiting) || w.watching(held) {
		t.Fatalf("after %s went, want %s watched", held, waiting)
	}
	w.Close()
	closed = true
	if got := budget.Take(1); got != 1 {
		t.Error("Close did not return the eventfd to the budget")
	}
}
