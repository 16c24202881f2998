//go:build linux

package collector

import (
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
)

// vmHost is a tree of a real cgroup v2 kernel's own files: the Kubernetes layouts the v2
// VM of test/v2 creates (systemd driver, containerd), copied while their workloads were
// frozen, process ids renumbered. `make fixtures-v2` rewrites it; the v2 suite fails when
// the VM's files or their formats drift from it. No cgroups: installHost never rewrites it.
var vmHost = host{name: "v2-vm-kubernetes", mode: fixture.V2}

// allHosts are the hand-written hosts and the VM's.
func allHosts() []host { return append(hosts[:len(hosts):len(hosts)], vmHost) }

// The VM's scenario, as the kernel's files show it, read back by the collectors: the limit
// that binds each container and where it comes from.
func TestVMHostEffectiveLimits(t *testing.T) {
	cfg := installHost(t, vmHost)
	env, err := NewEnv(cfg, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	eff, _ := newEffectiveCollector(env)
	mfs := scrapeFamilies(t, env, map[string]Collector{"effective": eff})
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
		m := seriesFor(mfs, "quota_cpu_effective_limit_cores", c.cgroup)
		if m == nil || m.GetGauge().GetValue() != c.cores || labelOf(m, "limit_cgroup") != c.from {
			t.Errorf("%s: effective limit %v, want %v from %s", c.cgroup, m, c.cores, c.from)
		}
	}
}
