//go:build linux

package collector

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 30: on cgroup v2 memory.events is hierarchical, so a container's OOM kill is in its
// pod's oom_kill too; memory.events.local (Linux 5.2+) has it at the victim's cgroup only.
// On a v2 fixture written as the kernel keeps both files (a kill in the guaranteed pod's
// container: 1 in the container's files, 1 in the pod's memory.events, 0 in its .local),
// quota_memory_oom_kills_total is 1 for the container and 0 for the pod, live and after
// both cgroups are removed (the OOM watcher's retained kills); a pod on a kernel without
// memory.events.local (the burstable one: no such file) falls back to memory.events.
func TestOOMKillCountedOnceOnV2(t *testing.T) {
	const pod = "/kubepods.slice/kubepods-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice"
	ctr := pod + "/cri-containerd-" + hexB + ".scope"
	const oldPod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice"
	var sys string
	dir := func(p string) string { return filepath.Join(sys, "fs", "cgroup", p) }
	write := func(p, file string, kills int) {
		t.Helper()
		body := fmt.Sprintf("low 0\nhigh 0\nmax %d\noom %d\noom_kill %d\noom_group_kill 0\n", 3*kills, kills, kills)
		if err := os.WriteFile(filepath.Join(dir(p), file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, env, oc := oomOnHost(t, hosts[0], func(cfg Config) { // v2-systemd-kubernetes
		sys = cfg.SysPath
		for _, p := range []string{pod, ctr} { // the kernel makes both files with the cgroup
			write(p, "memory.events", 0)
			write(p, "memory.events.local", 0)
		}
	})
	mc, err := registry["memory"].factory(env)
	if err != nil {
		t.Fatal(err)
	}
	scrape := func() string { return scrapeText(t, env, map[string]Collector{"memory": mc, "oom": oc}) }
	if !watchesEvery(t, env, scrape(), ctr, pod) { // the watcher watches every cgroup
		t.Fatal("the pod or its container is not watched")
	}

	write(ctr, "memory.events", 1)
	write(ctr, "memory.events.local", 1)
	write(pod, "memory.events", 1) // hierarchical: the container's kill
	write(oldPod, "memory.events", 2)
	time.Sleep(100 * time.Millisecond) // the watcher reads the files on the events
	got := scrape()
	for _, c := range []struct {
		path  string
		kills int
	}{{ctr, 1}, {pod, 0}, {oldPod, 2}} {
		want := fmt.Sprintf(`quota_memory_oom_kills_total{cgroup="%s",`, c.path)
		line := lineWith(got, want)
		if !strings.HasSuffix(line, fmt.Sprintf("} %d", c.kills)) {
			t.Errorf("%s: %q, want %d kills", c.path, line, c.kills)
		}
	}

	// Gone: the container's kill is kept under its identity, the pod has none of its own.
	if err := os.RemoveAll(dir(ctr)); err != nil {
		t.Fatal(err)
	}
	waitForSeries(t, env, oc, `quota_memory_oom_kills_total{cgroup="`+ctr+`",container_id="containerd://`+hexB+`",pod_uid="0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",qos_class="guaranteed"} 1`)
	if err := os.RemoveAll(dir(pod)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	got = scrapeText(t, env, map[string]Collector{"oom": oc})
	if line := lineWith(got, `quota_memory_oom_kills_total{cgroup="`+pod+`"`); line != "" {
		t.Errorf("the removed pod exports its container's kill again: %s", line)
	}
	if line := lineWith(got, `quota_memory_oom_kills_total{cgroup="`+ctr+`"`); !strings.HasSuffix(line, "} 1") {
		t.Errorf("the removed container's kill: %q, want 1", line)
	}
}

// lineWith is the first line of an exposition that starts with prefix ("" if none).
func lineWith(exposition, prefix string) string {
	for _, l := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// A kill in crun's "container" subgroup (CRI-O on v2) is the container's: the scope, which
// has no process of its own, counts it from memory.events (its descendants are its own), and
// the pod does not repeat it.
func TestOOMKillInCrunSubgroupCountedAtItsScope(t *testing.T) {
	var h host
	for _, x := range hosts {
		if x.name == "v2-crio-crun" {
			h = x
		}
	}
	cfg := installHost(t, h)
	scope := crioPodC + "/crio-" + hexA + ".scope"
	for p, kills := range map[string][2]int{crioPodC: {1, 0}, scope: {1, 0}, scope + "/container": {1, 1}} {
		for i, file := range []string{"memory.events", "memory.events.local"} {
			body := fmt.Sprintf("low 0\nhigh 0\nmax 3\noom 1\noom_kill %d\noom_group_kill 0\n", kills[i])
			if err := os.WriteFile(filepath.Join(cfg.SysPath, "fs", "cgroup", p, file), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	env, err := NewEnv(cfg, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	mc, err := registry["memory"].factory(env)
	if err != nil {
		t.Fatal(err)
	}
	got := scrapeText(t, env, map[string]Collector{"memory": mc})
	for p, want := range map[string]string{scope: "} 1", crioPodC: "} 0"} {
		if line := lineWith(got, `quota_memory_oom_kills_total{cgroup="`+p+`"`); !strings.HasSuffix(line, want) {
			t.Errorf("%s: %q, want %s kills", p, line, strings.TrimPrefix(want, "} "))
		}
	}
}
