//go:build linux

package collector

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
)

// vmHost is a tree of a real cgroup v2 kernel's own files: the Kubernetes layouts the v2
// VM of test/v2 creates (systemd driver, containerd), copied while their workloads were
// frozen, process ids renumbered. `make fixtures-v2` rewrites it; the v2 suite fails when
// the VM's files or their formats drift from it. No cgroups: installHost never rewrites it.
var vmHost = host{name: "v2-vm-kubernetes", mode: fixture.V2}

// kubeletHosts are real nodes' trees: the cgroups test/kubenode's cgroup v2 VM node made for
// its pods (kubelet with the systemd driver, containerd with runc and, for some pods, crun and
// its "container" subgroup; then a second kubelet with kind's cgroupRoot /kubelet; and, in a
// boot of its own, CRI-O with crun by default, conmon scopes in the pod slices and the empty
// cgroups of dropped infra containers), with the kubelet's log directories, ids replaced by
// stable ones. `make fixtures-kubenode` (and fixtures-kubenode-crio, with a CRI-O build)
// rewrites them; test-kubenode fails when the node's files or their formats drift from them.
var kubeletHosts = []host{
	{name: "v2-kubelet-systemd", mode: fixture.V2},
	{name: "v2-kubelet-kind", mode: fixture.V2},
	{name: "v2-kubelet-crio", mode: fixture.V2},
}

// allHosts are the hand-written hosts and the real ones.
func allHosts() []host {
	return append(append(hosts[:len(hosts):len(hosts)], vmHost), kubeletHosts...)
}

// The VM's scenario, as the kernel's files show it, read back by the collectors: the limit
// that binds each container and where it comes from.
func TestVMHostBindingLimits(t *testing.T) {
	cfg := installHost(t, vmHost)
	env, err := NewEnv(cfg, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	eff, _ := newBindingCollector(env)
	mfs := scrapeFamilies(t, env, map[string]Collector{"binding": eff})
	const (
		podA    = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a0a0a0a_1111_4111_8111_00000000000a.slice"
		podB    = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b0b0b0b_2222_4222_8222_00000000000b.slice"
		service = "/batch.slice/nightly-report.service"
	)
	for _, c := range []struct {
		cgroup, from string
		cores        float64
	}{
		{podA + "/cri-containerd-" + strings.Repeat("a", 64) + ".scope", podA + "/cri-containerd-" + strings.Repeat("a", 64) + ".scope", 0.2},
		{podB + "/cri-containerd-" + strings.Repeat("c", 64) + ".scope", podB, 0.5},
		{service, "/batch.slice", 0.3},
	} {
		m := seriesFor(mfs, "quota_cpu_binding_limit_cores", c.cgroup)
		if m == nil || m.GetGauge().GetValue() != c.cores || labelOf(m, "binding_cgroup") != c.from {
			t.Errorf("%s: binding limit %v, want %v from %s", c.cgroup, m, c.cores, c.from)
		}
	}
}

// cpu.stat.local (Linux 6.6+; the VM's 6.1 kernel has none, so the test adds the file in
// the kernel's format to a copy of the VM's tree): a container whose only limit is its pod's
// gets quota_cpu_throttled_local_seconds_total; a container with its own limit and the root
// do not; without the file (older kernels) nothing is exported and no error is counted.
func TestCPUStatLocal(t *testing.T) {
	const (
		podA = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a0a0a0a_1111_4111_8111_00000000000a.slice"
		podB = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b0b0b0b_2222_4222_8222_00000000000b.slice"
	)
	own := podA + "/cri-containerd-" + strings.Repeat("a", 64) + ".scope"
	podOnly := podB + "/cri-containerd-" + strings.Repeat("c", 64) + ".scope"
	const name = "quota_cpu_throttled_local_seconds_total"
	for _, withFile := range []bool{true, false} {
		cfg := installHost(t, vmHost)
		if withFile {
			// A 6.6+ kernel has the file in every cgroup but the root, in this format.
			root := filepath.Join(cfg.SysPath, "fs", "cgroup")
			for _, dir := range allDirs(t, root)[1:] {
				if err := os.WriteFile(filepath.Join(dir, "cpu.stat.local"), []byte("throttled_usec 2422234\n"), 0o444); err != nil {
					t.Fatal(err)
				}
			}
		}
		env, err := NewEnv(cfg, discardLogger())
		if err != nil {
			t.Fatal(err)
		}
		cpu, _ := newCPUCollector(env)
		mfs := scrapeFamilies(t, env, map[string]Collector{"cpu": cpu})
		m := seriesFor(mfs, name, podOnly)
		switch {
		case withFile && (m == nil || m.GetCounter().GetValue() != 2.422234):
			t.Errorf("pod-limited container: %s = %v, want 2.422234", name, m)
		case !withFile && m != nil:
			t.Errorf("without cpu.stat.local: %s exported: %v", name, m)
		}
		for _, cg := range []string{own, podB, "/"} {
			if m := seriesFor(mfs, name, cg); m != nil {
				t.Errorf("%s: %s exported for a cgroup with its own limit (or the root): %v", cg, name, m)
			}
		}
		if n := testutil.CollectAndCount(env.Errors.vec); n != 0 {
			t.Errorf("withFile=%v: %d read error series counted", withFile, n)
		}
	}
}

// On each real node's tree, with that kubelet's log directories: every container is exported
// from one cgroup, its runtime's scope, with its name; each pod's own series (no container id)
// come from its pod slice only; nothing below a scope (crun's subgroup, a tenant's cgroups) and
// no runtime monitor (CRI-O's conmon scopes) is exported. The trees hold each of those.
func TestKubeletHostsIdentity(t *testing.T) {
	podSlice := regexp.MustCompile(`-pod([0-9a-f_]{36}|[0-9a-f]{32})\.slice$`)
	for _, h := range kubeletHosts {
		t.Run(h.name, func(t *testing.T) {
			cfg := installHost(t, h)
			env, err := NewEnv(cfg, discardLogger())
			if err != nil {
				t.Fatal(err)
			}
			cpu, _ := newCPUCollector(env)
			mem, _ := newMemoryCollector(env)
			mfs := scrapeFamilies(t, env, map[string]Collector{"cpu": cpu, "memory": mem})
			byContainer := map[string]map[string]bool{} // container_id -> cgroups
			podOwn := map[string]map[string]bool{}      // pod_uid -> cgroups without a container id
			add := func(m map[string]map[string]bool, k, cg string) {
				if m[k] == nil {
					m[k] = map[string]bool{}
				}
				m[k][cg] = true
			}
			for _, mf := range mfs {
				for _, m := range mf.GetMetric() {
					cg, id, uid := labelOf(m, "cgroup"), labelOf(m, "container_id"), labelOf(m, "pod_uid")
					base := path.Base(cg)
					switch {
					case strings.Contains(base, "conmon") || base == "container":
						t.Errorf("%s exported: %s", mf.GetName(), cg)
					case id != "":
						add(byContainer, id, cg)
						_, bare, _ := strings.Cut(id, "://")
						named := strings.HasSuffix(base, "-"+bare+".scope") || strings.HasSuffix(base, "-"+bare) // CRI-O's dropped infra: crio-<id>
						if !named || labelOf(m, "container") == "" || uid == "" {
							t.Errorf("%s: container %s from %s, container=%q pod_uid=%q", mf.GetName(), id, cg, labelOf(m, "container"), uid)
						}
					case uid != "":
						add(podOwn, uid, cg)
						if !podSlice.MatchString(base) {
							t.Errorf("%s: pod %s's own series from %s, not its pod slice", mf.GetName(), uid, cg)
						}
					}
				}
			}
			for k, cgs := range byContainer {
				if len(cgs) != 1 {
					t.Errorf("container %s exported from %d cgroups: %v", k, len(cgs), cgs)
				}
			}
			for k, cgs := range podOwn {
				if len(cgs) != 1 {
					t.Errorf("pod %s's own series from %d cgroups: %v", k, len(cgs), cgs)
				}
			}
			if len(byContainer) == 0 || len(podOwn) == 0 {
				t.Fatalf("%d containers and %d pods exported", len(byContainer), len(podOwn))
			}
			t.Logf("%d containers and %d pods, each from one cgroup", len(byContainer), len(podOwn))
		})
	}
}
