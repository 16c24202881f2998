//go:build linux

package collector

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The watcher on a v2 fixture tree (inotify reports writes to regular files as it does for
// the kernel's memory.events): a kill written to a container's memory.events, then the
// container's directory removed; the next scrape still shows the kill under its identity.
// The real kernel case runs in the v2 VM (test/v2, TestOOMKillOutlivesItsCgroup).
func TestOOMKillsOutliveTheirCgroup(t *testing.T) {
	var h host
	for _, x := range hosts {
		if x.name == "v2-systemd-kubernetes" {
			h = x
		}
	}
	cfg := installHost(t, h)
	env, err := NewEnv(cfg, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	env.Cgroups.maxAge = 0 // see the removal at once
	c, err := newOOMCollector(env)
	if err != nil {
		t.Fatal(err)
	}
	defer c.(*oomCollector).Close()
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
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := scrapeText(t, env, map[string]Collector{"oom": c})
		if strings.Contains(got, want+"\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %s\ngot:\n%s", want, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
