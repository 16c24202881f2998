//go:build linux

package collector

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A kill the watcher could not read: the container's memory.events changed and its cgroup
// was removed before the watcher got to the file (held back here by its lock, as a loaded
// exporter is by the scheduler; in the v2 VM the runtime's 200 ms were once too short).
// The pod's hierarchical count tells the kill, and it is kept under the dead container's
// identity, once; a removal without a kill in the pod adds nothing.
func TestOOMKillLostReadCountsFromThePod(t *testing.T) {
	cfg, env, c := oomOnHost(t, hosts[0]) // v2-systemd-kubernetes
	const pod = "/kubepods.slice/kubepods-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice"
	guaranteed := pod + "/cri-containerd-" + hexB + ".scope"
	scrapeText(t, env, map[string]Collector{"oom": c}) // watches every cgroup
	if !c.w.Watching(guaranteed) {
		t.Fatal("the container is not watched")
	}
	cgDir := func(p string) string { return filepath.Join(cfg.SysPath, "fs", "cgroup", p) }
	events := "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n"
	release := c.w.Hold() // the watcher's event loop waits here, as if descheduled
	for _, p := range []string{guaranteed, pod} {
		if err := os.WriteFile(filepath.Join(cgDir(p), "memory.events"), []byte(events), 0o644); err != nil {
			release()
			t.Fatal(err)
		}
	}
	err := os.RemoveAll(cgDir(guaranteed))
	release()
	if err != nil {
		t.Fatal(err)
	}
	want := `quota_memory_oom_kills_total{cgroup="` + guaranteed + `",container_id="containerd://` + hexB + `",pod_uid="0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",qos_class="guaranteed"} 1`
	waitForSeries(t, env, c, want)
	// The other container of a pod (whose own count was 1 before) is removed after a lost
	// change, with no new kill in its pod: it keeps the 1 it had, no more.
	const burstablePod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice"
	other := burstablePod + "/cri-containerd-" + hexA + ".scope"
	release = c.w.Hold()
	_ = os.WriteFile(filepath.Join(cgDir(other), "memory.events"), []byte("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\noom_group_kill 0\n"), 0o644)
	err = os.RemoveAll(cgDir(other))
	release()
	if err != nil {
		t.Fatal(err)
	}
	want = `quota_memory_oom_kills_total{cgroup="` + other + `",container_id="containerd://` + hexA + `",pod_uid="6b2c3f9a-1d2e-4f5a-8b9c-0d1e2f3a4b5c",qos_class="burstable"} 1`
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
