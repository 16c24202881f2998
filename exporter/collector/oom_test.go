//go:build linux

package collector

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/fdbudget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/oomwatch"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// The watcher on a v2 fixture tree (inotify reports writes to regular files as it does for
// the kernel's memory.events): a kill written to a container's memory.events, then the
// container's directory removed; the next scrape still shows the kill under its identity.
// The real kernel case runs in the v2 VM (test/v2, TestOOMKillOutlivesItsCgroup).
// oomOnHost installs a v2 fixture host, runs prepare on it (files the kernel makes with a
// cgroup, before anything watches it) and starts the (v2) OOM watcher on it, with discovery
// uncached so that each scrape sees removals at once; it is closed when the test ends.
func oomOnHost(t *testing.T, h host, prepare ...func(Config)) (Config, *Env, *oomCollector) {
	t.Helper()
	cfg := installHost(t, h)
	for _, p := range prepare {
		p(cfg)
	}
	env, err := NewEnv(cfg, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	env.Cgroups.MaxAge = 0
	oc, err := newOOMCollector(env)
	if err != nil {
		t.Fatal(err)
	}
	c := oc.(*oomCollector)
	t.Cleanup(c.Close)
	return cfg, env, c
}

func TestOOMKillsOutliveTheirCgroup(t *testing.T) {
	var h host
	for _, x := range hosts {
		if x.name == "v2-systemd-kubernetes" {
			h = x
		}
	}
	cfg, env, c := oomOnHost(t, h)
	guaranteed := "/kubepods.slice/kubepods-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice/cri-containerd-" + hexB + ".scope"
	if got := scrapeText(t, env, map[string]Collector{"oom": c}); strings.Contains(got, "oom_kills") {
		t.Fatalf("nothing is gone yet, but:\n%s", got)
	}
	dir := filepath.Join(cfg.SysPath, "fs", "cgroup", guaranteed)
	if err := os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the watcher reads the file on the event
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	want := `quota_memory_oom_kills_total{cgroup="` + guaranteed + `",container_id="containerd://` + hexB + `",pod_uid="0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",qos_class="guaranteed"} 1`
	waitForSeries(t, env, c, want)
}

// waitForSeries scrapes the oom collector until its exposition has the line want (the
// watcher reacts to inotify events on its own goroutine), for at most 5 s.
func waitForSeries(t *testing.T, env *Env, c Collector, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := scrapeText(t, env, map[string]Collector{"oom": c})
		if strings.Contains(got, want+"\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %s\ngot:\n%s", want, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// watchesEvery tells whether the oom collector's exposition says it watches as many cgroups
// as the last walk has in the memory hierarchy (the root aside: its kills are the host's),
// each of paths among them.
func watchesEvery(t *testing.T, env *Env, exposition string, paths ...string) bool {
	t.Helper()
	snap := env.Cgroups.Latest()
	if snap == nil {
		return false
	}
	walked := map[string]bool{}
	for _, cg := range append(slices.Clone(snap.Cgroups), snap.Unlinked...) {
		walked[cg.Path] = cg.InMemory && cg.Path != "/"
	}
	for _, p := range paths {
		if !walked[p] {
			t.Errorf("the walk has no memory cgroup %s", p)
			return false
		}
	}
	n := 0
	for _, in := range walked {
		if in {
			n++
		}
	}
	line := lineWith(exposition, "quota_exporter_oom_watched_cgroups ")
	if line == "" {
		t.Errorf("no quota_exporter_oom_watched_cgroups in the scrape")
		return false
	}
	watched, err := strconv.Atoi(strings.TrimPrefix(line, "quota_exporter_oom_watched_cgroups "))
	if err != nil {
		t.Fatal(err)
	}
	if watched != n {
		t.Logf("%d cgroups watched, the walk has %d in the memory hierarchy", watched, n)
	}
	return watched == n
}

// oomAllocator is a C program that touches 64 MiB and then waits: in a 32 MiB cgroup the
// kernel OOM-kills it.
const oomAllocator = `#include <stdlib.h>
#include <unistd.h>
int main(void) {
	size_t n = 64 << 20;
	volatile char *p = malloc(n); /* volatile: the stores are not optimised away */
	if (!p) return 2;
	for (size_t i = 0; i < n; i += 4096) p[i] = 1;
	pause();
	return p[0];
}
`

// TestOOMKillOfRemovedV1Container is the v1 case on this host's real cgroups: a process in a
// 32 MiB container cgroup (kubepods cgroupfs-driver layout) is OOM-killed and the test removes
// the cgroup at once, as a runtime does, then starts the "restarted" container in a new
// cgroup of the same pod. The dead container's kill is exported once under its identity, the
// new container's count is its own, and the series ends after the retention.
func TestOOMKillOfRemovedV1Container(t *testing.T) {
	src := filepath.Join(t.TempDir(), "alloc.c")
	if err := os.WriteFile(src, []byte(oomAllocator), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := testutil.BuildC(t, src, "-O1")
	root := testutil.NewCgroup(t, "oom", testutil.CgroupOptions{})
	const uid = "6f1c2a3b-4d5e-4f60-8a9b-0c1d2e3f4a5b"
	pod := root.Child("kubepods", testutil.CgroupOptions{}).Child("burstable", testutil.CgroupOptions{}).Child("pod"+uid, testutil.CgroupOptions{})
	id1, id2 := strings.Repeat("a1", 32), strings.Repeat("b2", 32)
	container := func(id string) *testutil.Cgroup {
		c := pod.Child(id, testutil.CgroupOptions{MemoryLimit: 32 << 20})
		if _, err := os.Stat(filepath.Join(c.Dir("memory"), "memory.memsw.limit_in_bytes")); err == nil {
			c.Write("memory", "memory.memsw.limit_in_bytes", strconv.Itoa(32<<20)) // no escape into swap
		}
		return c
	}
	oomKill := func(c *testutil.Cgroup) {
		t.Helper()
		cmd := c.Command(bin)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the allocator was not OOM-killed: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the allocator was not OOM-killed within 20 s")
		}
	}

	const retention = 3 * time.Second
	env, err := NewEnv(Config{ProcPath: "/proc", SysPath: "/sys", OOMRetention: retention,
		CgroupInclude: regexp.MustCompile("^" + regexp.QuoteMeta(root.Path) + "(/.*)?$")}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	env.Cgroups.MaxAge = 0 // see removals at once
	oc, err := newOOMCollector(env)
	if err != nil {
		t.Fatal(err)
	}
	oom, ok := oc.(*oomCollector)
	testutil.Require(t, ok && env.Cgroups.Layout().Memory.Version == 1, "the memory hierarchy is not a v1 cgroup mount")
	defer func() {
		start := time.Now()
		oom.Close()
		if d := time.Since(start); d > oomwatch.CloseWait+time.Second {
			t.Errorf("Close took %v", d)
		}
	}()
	mem, _ := newMemoryCollector(env)
	collectors := map[string]Collector{"memory": mem, "oom": oom}
	kills := func(mfs map[string]*dto.MetricFamily, c *testutil.Cgroup, id string) float64 {
		t.Helper()
		var got []*dto.Metric
		for _, m := range mfs["quota_memory_oom_kills_total"].GetMetric() {
			for _, lp := range m.Label {
				if lp.GetName() == "cgroup" && lp.GetValue() == c.Path {
					got = append(got, m)
				}
			}
		}
		switch len(got) {
		case 0:
			return 0
		case 1:
			if m := seriesFor(mfs, "quota_memory_oom_kills_total", c.Path, "container_id", "containerd://"+id, "pod_uid", uid, "qos_class", "burstable"); m == nil {
				t.Errorf("the series of %s lacks its identity: %v", c.Path, got[0].Label)
			}
			return value(got[0])
		}
		t.Fatalf("%d series for %s: %v", len(got), c.Path, got)
		return 0
	}
	waitFor := func(what string, cond func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mfs := scrapeFamilies(t, env, collectors)
			if cond(mfs) {
				return mfs
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10 s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	c1 := container(id1)
	waitFor("the eventfd of the new container", func(mfs map[string]*dto.MetricFamily) bool { // scrapes register it
		w := mfs["quota_exporter_oom_watched_cgroups"].GetMetric()
		return len(w) == 1 && value(w[0]) >= 1
	})
	oomKill(c1)
	c1.Remove() // as the runtime does, before any scrape
	c2 := container(id2)
	sleeper := c2.Command("/bin/sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	mfs := waitFor("the removed container's kill", func(mfs map[string]*dto.MetricFamily) bool { return kills(mfs, c1, id1) == 1 })
	if k := kills(mfs, c2, id2); k != 0 {
		t.Errorf("the restarted container shows %v kills, want 0", k)
	}
	for range 3 { // counted once, whatever the scrapes
		time.Sleep(200 * time.Millisecond)
		mfs = scrapeFamilies(t, env, collectors)
		if k := kills(mfs, c1, id1); k != 1 {
			t.Fatalf("removed container: %v kills in a later scrape, want 1", k)
		}
	}

	// A kill in the restarted container is its own: live (memory collector), then, once its
	// cgroup is removed 200 ms later, retained (oom collector), 1 throughout.
	_ = syscallKill(sleeper.Process.Pid)
	_ = sleeper.Wait()
	oomKill(c2)
	mfs = scrapeFamilies(t, env, collectors)
	if k1, k2 := kills(mfs, c1, id1), kills(mfs, c2, id2); k1 != 1 || k2 != 1 {
		t.Errorf("after the second kill: removed container %v, restarted container %v; want 1 and 1", k1, k2)
	}
	time.Sleep(200 * time.Millisecond)
	c2.Remove()
	time.Sleep(700 * time.Millisecond) // the checkers settle
	mfs = scrapeFamilies(t, env, collectors)
	if k1, k2 := kills(mfs, c1, id1), kills(mfs, c2, id2); k1 != 1 || k2 != 1 {
		t.Errorf("after the removal of the restarted container: %v and %v; want 1 and 1", k1, k2)
	}
	if k := value(seriesFor(mfs, "quota_memory_oom_kills_total", pod.Path)); !math.IsNaN(k) && k != 0 {
		t.Errorf("the pod shows %v kills: v1 counts them in the victim's cgroup only", k)
	}

	time.Sleep(retention)
	waitFor("the end of the retention", func(mfs map[string]*dto.MetricFamily) bool {
		return kills(mfs, c1, id1) == 0 && kills(mfs, c2, id2) == 0
	})
}

// TestOOMv1DescriptorBudget: beyond its budget the watcher holds no more eventfds and counts
// the cgroups it left unwatched.
func TestOOMv1DescriptorBudget(t *testing.T) {
	root := testutil.NewCgroup(t, "oombudget", testutil.CgroupOptions{})
	env, err := NewEnv(Config{ProcPath: "/proc", SysPath: "/sys",
		CgroupInclude: regexp.MustCompile("^" + regexp.QuoteMeta(root.Path) + "/.*$")}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	env.Descriptors = fdbudget.New(2, 0) // the watcher's alone: no throttle sampler here
	oc, err := newOOMCollector(env)
	if err != nil {
		t.Fatal(err)
	}
	oom, ok := oc.(*oomCollector)
	testutil.Require(t, ok && env.Cgroups.Layout().Memory.Version == 1, "the memory hierarchy is not a v1 cgroup mount")
	defer oom.Close()
	for i := range 3 { // after the budget is set, so that every sync sees it
		root.Child("c"+strconv.Itoa(i), testutil.CgroupOptions{MemoryLimit: 32 << 20})
	}
	gauge := func(mfs map[string]*dto.MetricFamily, name string) float64 {
		if m := mfs[name].GetMetric(); len(m) == 1 {
			return value(m[0])
		}
		return math.NaN()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mfs := scrapeFamilies(t, env, map[string]Collector{"oom": oom})
		w, u := gauge(mfs, "quota_exporter_oom_watched_cgroups"), gauge(mfs, "quota_exporter_oom_unwatched_cgroups")
		if w == 2 && u == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watched %v, unwatched %v; want 2 and 1", w, u)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A container watched before the kubelet's log link named it (so named by its pod only) and
// OOM-killed and removed: the retained kill is exported with the container's full names, the
// label set its live series had once the link appeared, not a second, pod-only one.
func TestOOMRetainedKillNamedAgain(t *testing.T) {
	cfg := installHost(t, hosts[0])
	cfg.PodLogsPath = filepath.Join("testdata", "podlogs", "var", "log")
	env, err := NewEnv(cfg, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	r := oomwatch.NewRetained(cfg.OOMRetention, func(cg *cgroupid.Cgroup) { env.PodNames.NameCgroup(cg) })
	gone := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice/cri-containerd-gone.scope"
	r.Keep(cgroupid.Cgroup{
		Path:     gone,
		Identity: cgroupid.Identity{PodUID: "6b2c3f9a-1d2e-4f5a-8b9c-0d1e2f3a4b5c", ContainerID: "containerd://" + hexA, QoSClass: "burstable"},
		Names:    cgroupid.KubeNames{Namespace: "shop", Pod: "checkout-7d9f8b6c5-x2kqp"}, // the pod's only
	}, 1)
	ch := make(chan prometheus.Metric, 10)
	exportGone(context.Background(), env, ch, r)
	close(ch)
	var got []string
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		for _, l := range pb.GetLabel() {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
	}
	if !slices.Contains(got, "container=app") || !slices.Contains(got, "cgroup="+gone) {
		t.Errorf("retained kill exported with %v, want the container's names (container=app)", got)
	}
}

// Between scrapes the OOM watcher is fed by the cgroup source's one rediscovery schedule: a
// directory listing each check, and a full walk (discovery, which reads every cgroup.procs)
// only when the set changed, and once more after a change. With no scrape: the first walk is
// applied, an unchanged tree is not walked again, a mkdir is walked twice (limits and PIDs
// come after the mkdir) and the new cgroup is watched, and an rmdir is walked and the cgroup
// retired (the v2 hosts; v1 registration needs a real cgroup.event_control:
// TestOOMKillOfRemovedV1Container).
func TestOOMRediscoveryOnlyOnChange(t *testing.T) {
	for _, h := range allHosts() {
		if h.mode != vmHost.mode { // v2 only
			continue // the v1 watcher needs real cgroup.event_control (TestOOMKillOfRemovedV1Container)
		}
		t.Run(h.name, func(t *testing.T) {
			cfg := installHost(t, h)
			const check = 20 * time.Millisecond
			cfg.CgroupCheckEvery = check
			env, err := NewEnv(cfg, discardLogger())
			if err != nil {
				t.Fatal(err)
			}
			env.Cgroups.MaxAge = 0
			oc, err := newOOMCollector(env)
			if err != nil {
				t.Fatal(err)
			}
			c := oc.(*oomCollector)
			t.Cleanup(c.Close)
			generation := func() uint64 {
				if snap := env.Cgroups.Latest(); snap != nil {
					return snap.Generation
				}
				return 0
			}
			// settled waits until no walk is published for 25 checks, and returns the generation.
			settled := func(what string) uint64 {
				t.Helper()
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
					gen := generation()
					time.Sleep(25 * check)
					if gen > 0 && generation() == gen {
						return gen
					}
				}
				t.Fatalf("%s: the schedule kept walking an unchanged tree (generation %d)", what, generation())
				return 0
			}
			waitUntil(t, func() bool { watched, _ := c.w.Counts(); return watched > 0 }) // the first walk, applied without a scrape
			gen := settled("at start")
			if gen < 2 {
				t.Errorf("generation %d after the first check: the check after a change must walk once more (limits and PIDs come after the mkdir)", gen)
			}
			before, _ := c.w.Counts() // the watcher gets nothing else to watch: the new cgroup is the one more
			root := filepath.Join(cfg.SysPath, "fs", "cgroup")
			fresh := filepath.Join(root, "kubepods.slice", "new-test.scope")
			if err := os.MkdirAll(fresh, 0o755); err != nil {
				t.Fatal(err)
			}
			// A new container cgroup with a memory limit (discovery watches cgroups with processes or
			// limits), with the files the watcher reads.
			for name, body := range map[string]string{"cgroup.procs": "", "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n", "memory.max": "268435456\n"} {
				if err := os.WriteFile(filepath.Join(fresh, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			waitUntil(t, func() bool { watched, _ := c.w.Counts(); return watched == before+1 })
			if after := settled("after a mkdir"); after < gen+2 {
				t.Errorf("a new cgroup was walked %d times, want 2 (the change and the settling walk)", after-gen)
			} else {
				gen = after
			}
			if err := os.RemoveAll(fresh); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, func() bool { return generation() > gen })
			waitUntil(t, func() bool { watched, _ := c.w.Counts(); return watched == before })
			for _, cg := range env.Cgroups.Latest().Cgroups {
				if cg.Path == "/kubepods.slice/new-test.scope" {
					t.Error("a removed cgroup went unnoticed")
				}
			}
		})
	}
}
