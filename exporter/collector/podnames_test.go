//go:build linux

package collector

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestKubernetesNamesOnFixtureHost: the v2 systemd Kubernetes host with the kubelet's log
// directories of two of its three pods (testdata/podlogs, the kubelet's layout: pods/ holds
// <namespace>_<pod>_<uid>/<container>/, containers/ symlinks <pod>_<namespace>_<container>-<id>.log).
// Container cgroups get namespace, pod and container; pod cgroups namespace and pod; the
// third pod (not in the logs) and non-Kubernetes cgroups get none.
func TestKubernetesNamesOnFixtureHost(t *testing.T) {
	cfg := installHost(t, hosts[0])
	cfg.PodLogsPath = filepath.Join("testdata", "podlogs", "var", "log")
	env, err := NewEnv(cfg, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	got := scrapeCgroups(t, env)

	const (
		podA = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice"
		podB = "/kubepods.slice/kubepods-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice"
	)
	want := map[string]string{ // cgroup -> the names its series carry
		podA: `namespace="shop",pod="checkout-7d9f8b6c5-x2kqp"`,
		podA + "/cri-containerd-" + hexA + ".scope": `container="app",container_id="containerd://` + hexA + `",namespace="shop",pod="checkout-7d9f8b6c5-x2kqp"`,
		podB: `namespace="payments",pod="ledger-0"`,
		podB + "/cri-containerd-" + hexB + ".scope": `container="ledger",container_id="containerd://` + hexB + `",namespace="payments",pod="ledger-0"`,
	}
	seen := map[string]int{}
	for _, line := range strings.Split(got, "\n") {
		if !strings.HasPrefix(line, "quota_") || strings.HasPrefix(line, "quota_exporter_") {
			continue
		}
		i := strings.Index(line, `cgroup="`)
		if i < 0 {
			continue
		}
		cg := line[i+len(`cgroup="`):]
		cg = cg[:strings.IndexByte(cg, '"')]
		names, ok := want[cg]
		if !ok {
			for _, l := range []string{`namespace="`, `pod="`, `container="`} {
				if strings.Contains(line, l) {
					t.Errorf("unnamed cgroup %s has a name label: %s", cg, line)
				}
			}
			continue
		}
		seen[cg]++
		for _, l := range strings.Split(names, ",") {
			if !strings.Contains(line, l) {
				t.Errorf("%s: missing %s in %s", cg, l, line)
			}
		}
		if !strings.Contains(names, "container=") && strings.Contains(line, `container="`) {
			t.Errorf("pod cgroup %s has a container name: %s", cg, line)
		}
	}
	for cg := range want {
		if seen[cg] == 0 {
			t.Errorf("no series for %s", cg)
		}
	}
	if !strings.Contains(got, `quota_cpu_throttled_window_ratio_count{cgroup="`+podA+`/cri-containerd-`+hexA+`.scope",container="app"`) {
		t.Errorf("the per-second histograms carry no names:\n%s", got)
	}
}

// seriesBudget is the documented per-container series budget of a default scrape (see the
// header of docs/metrics.md): a container with a CPU quota and a memory limit. cgroup v2 adds
// 4 PSI series (cpu and memory, some and full). A cpuset of its own (1 series) and a burst
// allowance (3) come on top: they are configured per container, and absent by default.
var seriesBudget = map[int]int{1: 20, 2: 24}

// TestSeriesBudget fails when a default scrape of a fixture container cgroup exports more
// series than the documented budget, or any series carries an empty-valued label.
func TestSeriesBudget(t *testing.T) {
	for _, h := range hosts[:2] { // the Kubernetes hosts: v2 systemd, v1 cgroupfs
		t.Run(h.name, func(t *testing.T) {
			env, err := NewEnv(installHost(t, h), discardLogger())
			if err != nil {
				t.Fatal(err)
			}
			got := scrapeCgroups(t, env, "binding", "oom")
			if strings.Contains(got, `=""`) {
				t.Errorf("empty-valued label in a default scrape:\n%s", got)
			}
			budget := seriesBudget[env.Cgroups.Layout().CPU.Version]
			per := map[string]int{}
			for _, line := range strings.Split(got, "\n") {
				if strings.HasPrefix(line, "quota_cpu_cpuset_cpus") || strings.HasPrefix(line, "quota_cpu_burst") {
					continue
				}
				if i := strings.Index(line, `cgroup="`); i >= 0 && strings.Contains(line, `container_id="`) && !strings.HasPrefix(line, "#") {
					cg := line[i+len(`cgroup="`):]
					per[cg[:strings.IndexByte(cg, '"')]]++
				}
			}
			if len(per) == 0 {
				t.Fatal("no container cgroup in the scrape")
			}
			for cg, n := range per {
				t.Logf("%d series: %s", n, cg)
				if n > budget {
					t.Errorf("%s: %d series, budget %d", cg, n, budget)
				}
			}
		})
	}
}
