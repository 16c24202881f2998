package collector

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The exporter in a container with hostPID and the host's /sys/fs/cgroup mounted at
// /host/sys/fs/cgroup: in a private cgroup namespace mountinfo shows that mount's root as
// "/../../..". The scrape must carry the host's paths, exactly as the golden file of the same
// host scraped from outside.
func TestHostCgroupTreeMountedIntoContainer(t *testing.T) {
	h := hosts[0] // v2 systemd-driver Kubernetes node
	cfg := installHost(t, h)
	root := filepath.Dir(cfg.ProcPath)
	mi := filepath.Join(cfg.ProcPath, "self", "mountinfo")
	b, err := os.ReadFile(mi)
	if err != nil {
		t.Fatal(err)
	}
	// Move the tree to where a container would mount it and show the mount as outside the namespace.
	hostDir := filepath.Join(root, "host", "sys")
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "sys"), filepath.Join(hostDir, "sys")); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(l, " - cgroup2 ") {
			l = strings.Replace(l, " / "+root+"/sys/fs/cgroup ", " /../../.. "+hostDir+"/sys/fs/cgroup ", 1)
		}
		lines = append(lines, l)
	}
	if err := os.WriteFile(mi, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.SysPath = filepath.Join(hostDir, "sys")
	env, err := NewEnv(cfg, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	if !env.Cgroups.Layout().OutsideNamespace {
		t.Error("layout does not notice the mount lies outside the namespace")
	}
	cpu, _ := newCPUCollector(env)
	mem, _ := newMemoryCollector(env)
	eff, _ := newBindingCollector(env)
	got := scrapeText(t, env, map[string]Collector{"cpu": cpu, "memory": mem, "binding": eff})
	want, _ := os.ReadFile(filepath.Join("testdata", h.name+".golden.prom"))
	// The golden file also has the throttle sampler's series; compare the cpu and memory ones.
	for _, line := range strings.Split(string(want), "\n") {
		if (strings.HasPrefix(line, "quota_cpu_") && !strings.HasPrefix(line, "quota_cpu_throttled_window")) || strings.HasPrefix(line, "quota_memory_") {
			if strings.HasPrefix(line, "quota_cpu_periods_total") || strings.HasPrefix(line, "quota_cpu_throttled_periods_total") || strings.HasPrefix(line, "quota_cpu_throttled_seconds_total") {
				continue // the golden run bumped these between sampler windows
			}
			if !strings.Contains(got, line+"\n") {
				t.Errorf("missing from the in-container scrape: %s", line)
			}
		}
	}
	_ = time.Second
}
