//go:build linux

package cgroups

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

const (
	pod       = "/kubepods.slice/kubepods-podA.slice"
	container = pod + "/cri-containerd-a.scope"
)

var tree = []fixture.Cgroup{
	{Path: pod, QuotaUS: 200000, MemoryLimit: 1 << 30},
	{Path: container, PIDs: []int{7}, QuotaUS: 300000, MemoryLimit: 512 << 20},
}

func fixtureSource(t *testing.T) (*Source, string) {
	t.Helper()
	root := t.TempDir()
	if err := fixture.Write(root, fixture.V2, tree); err != nil {
		t.Fatal(err)
	}
	src, err := New(Options{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys")},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	src.MaxAge = 0
	return src, root
}

// Each walk is published as a snapshot with the next generation, and carries the binding
// limits computed once: the container's CPU binds at its pod (2 cores < 3), its memory at itself.
func TestSnapshotGenerationsAndBindings(t *testing.T) {
	src, _ := fixtureSource(t)
	ctx := context.Background()
	first := src.Snapshot(ctx)
	second := src.Snapshot(ctx)
	if first.Generation != 1 || second.Generation != 2 || src.Latest() != second {
		t.Fatalf("generations %d, %d; latest %p want %p", first.Generation, second.Generation, src.Latest(), second)
	}
	b := second.Bindings[container]
	if b.CPUCgroup != pod || b.CPUCores != 2 || b.MemoryCgroup != container || b.MemoryBytes != 512<<20 {
		t.Errorf("binding of the container: %+v", b)
	}
	above := second.BindingAbove(container)
	if above.CPUCgroup != pod || above.CPU.QuotaUS != 200000 || above.MemoryCgroup != pod || above.MemoryBytes != 1<<30 {
		t.Errorf("binding above the container: %+v", above)
	}
	if above := second.BindingAbove(pod); above.CPUCgroup != "" || above.MemoryCgroup != "" {
		t.Errorf("binding above the pod (nothing limited above it): %+v", above)
	}
}

// A subscriber is told once per batch of walks, and Next gives what came and went since the
// snapshot it last took, however many walks it missed.
func TestSubscriptionDeltas(t *testing.T) {
	src, root := fixtureSource(t)
	src.checkEvery = time.Hour // no walks but the test's
	ctx := context.Background()
	src.Snapshot(ctx)
	sub := src.Subscribe()
	defer sub.Close()
	<-sub.C // a snapshot published before Subscribe is delivered
	// The schedule's first check walks at once (it has no directory list yet).
	waitFor(t, func() bool { return src.Latest().Generation == 2 })
	d, ok := sub.Next()
	if !ok || d.Prev != nil || len(d.Added) != len(d.Next.Cgroups) || len(d.Removed) != 0 {
		t.Fatalf("first delta: ok %v, %+v", ok, d)
	}
	select { // gen 2 may have come after the first signal was taken
	case <-sub.C:
	default:
	}
	if _, ok := sub.Next(); ok {
		t.Fatal("a second delta without a new walk")
	}
	// A new limited cgroup appears, then the container goes, in two walks the subscriber
	// sees as one delta.
	extra := pod + "/cri-containerd-b.scope"
	if err := fixture.Write(root, fixture.V2, append(tree, fixture.Cgroup{Path: extra, QuotaUS: 50000})); err != nil {
		t.Fatal(err)
	}
	src.Snapshot(ctx)
	if err := os.RemoveAll(filepath.Join(root, "sys", "fs", "cgroup", container)); err != nil {
		t.Fatal(err)
	}
	last := src.Snapshot(ctx)
	<-sub.C
	d, ok = sub.Next()
	if !ok || d.Next != last || d.Prev.Generation != 2 {
		t.Fatalf("delta over two walks: ok %v, prev %v, next %v", ok, d.Prev, d.Next)
	}
	if len(d.Added) != 1 || d.Added[0].Path != extra || len(d.Removed) != 1 || d.Removed[0].Path != container {
		t.Errorf("added %v, removed %v; want %s added, %s removed", paths(d.Added), paths(d.Removed), extra, container)
	}
	sub.Close()
	src.Snapshot(ctx)
	select {
	case <-sub.C:
		t.Error("a closed subscription was signalled")
	default:
	}
}

// The schedule sees a new cgroup between scrapes: nobody calls Snapshot.
func TestScheduleWalksOnNewDirectory(t *testing.T) {
	src, root := fixtureSource(t)
	src.checkEvery = 20 * time.Millisecond
	sub := src.Subscribe()
	defer sub.Close()
	waitFor(t, func() bool { return src.Latest() != nil })
	extra := pod + "/cri-containerd-c.scope"
	if err := fixture.Write(root, fixture.V2, append(tree, fixture.Cgroup{Path: extra, QuotaUS: 50000})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		for _, cg := range src.Latest().Cgroups {
			if cg.Path == extra {
				return true
			}
		}
		return false
	})
	sub.Close()
	gen := src.Latest().Generation
	time.Sleep(100 * time.Millisecond)
	if src.Latest().Generation > gen+1 { // a check in progress at Close may still publish
		t.Errorf("the schedule went on walking after its last subscriber left: generation %d, then %d", gen, src.Latest().Generation)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func paths(cgs []cgroupid.Cgroup) []string {
	var out []string
	for _, cg := range cgs {
		out = append(out, cg.Path)
	}
	return out
}

// A v1 runtime makes a container's cpu and memory directories one after the other: a walk
// between the two sees the cgroup in cpu only, and the next walk's delta adds it again for
// the consumers of the memory hierarchy (the OOM watcher).
func TestDeltaAddsCgroupThatReachedAnotherHierarchy(t *testing.T) {
	const p = "/kubepods/pod1/c1"
	prev := &Snapshot{Cgroups: []cgroupid.Cgroup{{Path: p, InCPU: true}, {Path: "/stays", InCPU: true, InMemory: true}}}
	next := &Snapshot{Cgroups: []cgroupid.Cgroup{{Path: p, InCPU: true, InMemory: true}, {Path: "/stays", InCPU: true, InMemory: true}}}
	added, removed := diff(prev, next)
	if len(added) != 1 || added[0].Path != p || !added[0].InMemory || len(removed) != 0 {
		t.Errorf("added %v, removed %v; want %s added in memory, nothing removed", paths(added), paths(removed), p)
	}
	if added, removed := diff(next, prev); len(added) != 0 || len(removed) != 0 {
		t.Errorf("a cgroup that left a hierarchy but stays: added %v, removed %v; want neither", paths(added), paths(removed))
	}
}

// Under PinWalk every collector of a scrape sees the walk the first one got, even when a
// later walk (the schedule's, between two collectors) no longer lists a removed container:
// one collector must not export it live while another exports it as gone.
func TestPinWalkGivesOneWalkPerScrape(t *testing.T) {
	src, root := fixtureSource(t) // MaxAge 0: every unpinned call walks
	scrape := PinWalk(context.Background())
	first := src.Snapshot(scrape)
	if err := os.RemoveAll(filepath.Join(root, "sys", "fs", "cgroup", container)); err != nil {
		t.Fatal(err)
	}
	later := src.Snapshot(context.Background())
	if got := src.Snapshot(scrape); got != first {
		t.Fatalf("pinned scrape got generation %d after generation %d was published, want %d", got.Generation, later.Generation, first.Generation)
	}
	if slices.Contains(paths(later.Cgroups), container) || !slices.Contains(paths(first.Cgroups), container) {
		t.Errorf("the unpinned walk still lists the removed container: %v", paths(later.Cgroups))
	}
	if next := src.Snapshot(PinWalk(context.Background())); next == first {
		t.Error("a new scrape got the old scrape's walk")
	}
}
