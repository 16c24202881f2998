//go:build linux

package cgroups

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

func cpuMax(quota int64, period uint64) cgroupfs.CPUMax {
	return cgroupfs.CPUMax{QuotaUS: quota, PeriodUS: period}
}

// The layouts of docs/md: limits on pod and container, on the pod only, on a slice
// above a service, equal limits on pod and container, and memory limits on other levels
// than the CPU ones.
func TestBindings(t *testing.T) {
	pod := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podA.slice"
	podOnly := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podB.slice"
	guar := "/kubepods.slice/kubepods-podC.slice"
	cg := func(path string, cpu cgroupfs.CPUMax, mem uint64) cgroupid.Cgroup {
		return cgroupid.Cgroup{Path: path, InCPU: true, InMemory: true, CPUMax: cpu, HasCPUMax: true,
			MemoryLimit: mem, HasMemoryLimit: true}
	}
	unlimited := cpuMax(-1, 100000)
	cgs := []cgroupid.Cgroup{
		cg("/", cgroupfs.CPUMax{}, 0),
		cg("/kubepods.slice", unlimited, 8<<30),
		cg(pod, cpuMax(70000, 100000), 384<<20),
		cg(pod+"/cri-containerd-a.scope", cpuMax(20000, 100000), 512<<20), // memory: the pod's is smaller
		cg(pod+"/cri-containerd-b.scope", cpuMax(100000, 100000), 0),
		cg(podOnly, cpuMax(50000, 100000), 256<<20),
		cg(podOnly+"/cri-containerd-c.scope", unlimited, 0),
		cg(guar, cpuMax(100000, 100000), 1<<30),
		cg(guar+"/cri-containerd-d.scope", cpuMax(50000, 50000), 1<<30), // same cores, other period
		cg("/batch.slice/nightly-report.service", unlimited, 0),
		cg("/system.slice/sshd.service", unlimited, 0),
	}
	// batch.slice itself is not in the list (a path filter hid it): read through ancestor.
	asked := map[string]int{}
	ancestor := func(p string) cgroupfs.Limits {
		asked[p]++
		if p == "/batch.slice" {
			return cgroupfs.Limits{CPU: cpuMax(30000, 100000), HasCPU: true}
		}
		return cgroupfs.Limits{}
	}
	got := Bindings(cgs, ancestor)
	for _, c := range []struct {
		path    string
		cores   float64
		cpuFrom string
		mem     uint64
		memFrom string
	}{
		{"/", 0, "", 0, ""},
		{"/kubepods.slice", 0, "", 8 << 30, "/kubepods.slice"},
		{pod, 0.7, pod, 384 << 20, pod},
		{pod + "/cri-containerd-a.scope", 0.2, pod + "/cri-containerd-a.scope", 384 << 20, pod},
		{pod + "/cri-containerd-b.scope", 0.7, pod, 384 << 20, pod},
		{podOnly + "/cri-containerd-c.scope", 0.5, podOnly, 256 << 20, podOnly},
		{guar + "/cri-containerd-d.scope", 1, guar + "/cri-containerd-d.scope", 1 << 30, guar + "/cri-containerd-d.scope"},
		{"/batch.slice/nightly-report.service", 0.3, "/batch.slice", 0, ""},
		{"/system.slice/sshd.service", 0, "", 0, ""},
	} {
		b := got[c.path]
		if b.CPUCores != c.cores || b.CPUCgroup != c.cpuFrom || b.MemoryBytes != c.mem || b.MemoryCgroup != c.memFrom {
			t.Errorf("%s: got %+v, want cpu %v from %q, memory %v from %q", c.path, b, c.cores, c.cpuFrom, c.mem, c.memFrom)
		}
	}
	for p, n := range asked {
		if n != 1 {
			t.Errorf("ancestor %s read %d times, want once", p, n)
		}
	}
	if asked["/kubepods.slice"] != 0 {
		t.Error("a discovered ancestor was read again")
	}
	// Without a reader, an undiscovered ancestor counts as unlimited.
	if b := Bindings(cgs, nil)["/batch.slice/nightly-report.service"]; b.CPUCgroup != "" {
		t.Errorf("no reader: %+v", b)
	}
}

// On the v2 fixture host, every cgroup's binding limit is read from the files, and a
// container without limits under a limited pod gets the pod's.
func TestBindingLimitsFixtureV2(t *testing.T) {
	root := t.TempDir()
	if err := fixture.Install(filepath.Join("..", "..", "collector", "testdata", "hosts", "v2-systemd-kubernetes"), root); err != nil {
		t.Fatal(err)
	}
	l, err := cgroupfs.ReadLayout(filepath.Join(root, "proc"), filepath.Join(root, "sys"))
	if err != nil {
		t.Fatal(err)
	}
	cgs := DiscoverAll(context.Background(), l, WalkOptions{}).Cgroups
	eff := Bindings(cgs, l.ReadLimits)
	n := 0
	for _, cg := range cgs {
		b := eff[cg.Path]
		if b.CPUCgroup == "" {
			continue
		}
		n++
		own := l.ReadLimits(b.CPUCgroup)
		if !own.CPU.Limited() || own.CPU.Cores() != b.CPUCores {
			t.Errorf("%s: binding cgroup %s has cpu.max %+v, binding %v", cg.Path, b.CPUCgroup, own.CPU, b.CPUCores)
		}
		for _, p := range pathPrefixes(cg.Path) {
			if a := l.ReadLimits(p); a.CPU.Limited() && a.CPU.Cores() < b.CPUCores {
				t.Errorf("%s: ancestor %s has a smaller quota %v than the binding %v", cg.Path, p, a.CPU.Cores(), b.CPUCores)
			}
		}
	}
	if n == 0 {
		t.Error("no cgroup of the v2 fixture host has an binding CPU limit")
	}
}

func TestPathPrefixes(t *testing.T) {
	got := pathPrefixes("/a/b.slice/c")
	want := []string{"/", "/a", "/a/b.slice", "/a/b.slice/c"}
	if len(got) != len(want) {
		t.Fatalf("%q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%q", got)
		}
	}
	if g := pathPrefixes("/"); len(g) != 1 || g[0] != "/" {
		t.Errorf("%q", g)
	}
}
