//go:build linux

package oomwatch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

// watching tells whether the cgroup at path is watched.
func (w *Watcher) watching(path string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byPath[path] != nil
}

// A kill the watcher could not read: the container's memory.events changed and its cgroup
// was removed before the watcher got to the file (held back here by its lock, as a loaded
// exporter is by the scheduler; in the v2 VM the runtime's 200 ms were once too short).
// The pod's hierarchical count tells the kill, and it is kept under the dead container's
// identity, once; a removal without a kill in the pod adds nothing. On a v2 fixture tree
// laid out by the systemd driver (inotify reports writes to regular files as it does for the
// kernel's memory.events), every cgroup watched as discovery hands them over.
func TestLostReadCountsFromThePod(t *testing.T) {
	const (
		guaranteedPod = "/kubepods.slice/kubepods-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice"
		burstablePod  = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice"
	)
	guaranteed := guaranteedPod + "/cri-containerd-" + strings.Repeat("b", 64) + ".scope"
	other := burstablePod + "/cri-containerd-" + strings.Repeat("a", 64) + ".scope" // its own count was 1 before
	root := t.TempDir()
	err := fixture.Write(root, fixture.V2, []fixture.Cgroup{
		{Path: "/"}, {Path: "/kubepods.slice"}, {Path: "/kubepods.slice/kubepods-burstable.slice"},
		{Path: burstablePod}, {Path: other, OOMKills: 1}, {Path: guaranteedPod}, {Path: guaranteed},
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := cgroupfs.ReadLayout(filepath.Join(root, "proc"), filepath.Join(root, "sys"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(Config{Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var cgs []cgroupid.Cgroup
	byPath := map[string]cgroupid.Cgroup{}
	for _, p := range []string{"/kubepods.slice", burstablePod, other, guaranteedPod, guaranteed} {
		id, place := cgroupid.Locate(p, "")
		cg := cgroupid.Cgroup{Path: p, InMemory: true, Identity: id, Kind: place.Kind}
		cgs = append(cgs, cg)
		byPath[p] = cg
	}
	w.Watch(context.Background(), cgs, nil)
	if !w.watching(guaranteed) {
		t.Fatal("the container is not watched")
	}
	cgDir := func(p string) string { return l.Memory.Dir(p) }
	events := "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n"
	w.mu.Lock() // the watcher's event loop waits here, as if descheduled
	for _, p := range []string{guaranteed, guaranteedPod} {
		if err := os.WriteFile(filepath.Join(cgDir(p), "memory.events"), []byte(events), 0o644); err != nil {
			w.mu.Unlock()
			t.Fatal(err)
		}
	}
	err = os.RemoveAll(cgDir(guaranteed))
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	waitForRetained(t, w, byPath[guaranteed], 1)
	// The other container of a pod (whose own count was 1 before) is removed after a lost
	// change, with no new kill in its pod: it keeps the 1 it had, no more.
	w.mu.Lock()
	_ = os.WriteFile(filepath.Join(cgDir(other), "memory.events"), []byte("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\noom_group_kill 0\n"), 0o644)
	err = os.RemoveAll(cgDir(other))
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	waitForRetained(t, w, byPath[other], 1)
	time.Sleep(100 * time.Millisecond) // nothing more comes
	for _, g := range w.Retained().Gone(func(string) bool { return false }) {
		if want := byPath[g.Cgroup.Path]; g.Cgroup.Identity != want.Identity || g.Kills != 1 {
			t.Errorf("retained %+v, want %+v with 1 kill", g, want.Identity)
		}
	}
}

// waitForRetained waits (the backend reacts to inotify events on its own goroutine), for at
// most 5 s, until the watcher retains cg's kills under its identity, and checks their count.
func waitForRetained(t *testing.T, w *Watcher, cg cgroupid.Cgroup, kills uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, g := range w.Retained().Gone(func(string) bool { return false }) {
			if g.Cgroup.Path == cg.Path && g.Cgroup.Identity == cg.Identity && g.Kills == kills {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("retained %+v, want %s (%+v) with %d kills", w.Retained().Gone(func(string) bool { return false }), cg.Path, cg.Identity, kills)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
