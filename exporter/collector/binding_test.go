//go:build linux

package collector

import (
	"strings"
	"testing"
)

// On the fixture hosts: a cgroup with its own binding limit names itself, a container with
// no limits under a limited ancestor gets the ancestor's, and ties go to the deeper cgroup.
func TestBindingLimitsOnFixtureHosts(t *testing.T) {
	pod := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice/cri-containerd-" + hexA + ".scope"
	be := "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod11112222_3333_4444_5555_666677778888.slice/crio-" + hexC + ".scope"
	want := map[string][]string{
		"v2-systemd-kubernetes": {
			`quota_cpu_binding_limit_cores{binding_cgroup="` + pod + `",cgroup="` + pod + `",container_id="containerd://` + hexA + `",pod_uid="6b2c3f9a-1d2e-4f5a-8b9c-0d1e2f3a4b5c",qos_class="burstable"} 3`,
			`quota_memory_binding_limit_bytes{binding_cgroup="/kubepods.slice",cgroup="` + be + `",container_id="cri-o://` + hexC + `",pod_uid="11112222-3333-4444-5555-666677778888",qos_class="besteffort"} 7.516192768e+09`,
			`quota_cpu_binding_limit_cores{binding_cgroup="/system.slice/docker-` + hexE + `.scope",cgroup="/system.slice/docker-` + hexE + `.scope",container_id="docker://` + hexE + `"} 0.5`,
		},
		"v1-cgroupfs-kubernetes": {
			`quota_memory_binding_limit_bytes{binding_cgroup="/kubepods",cgroup="/kubepods/besteffort/pod99aa88bb-77cc-66dd-55ee-44ff33001122/crio-` + hexC + `",container_id="cri-o://` + hexC + `",pod_uid="99aa88bb-77cc-66dd-55ee-44ff33001122",qos_class="besteffort"} 7.516192768e+09`,
			`quota_cpu_binding_limit_cores{binding_cgroup="/kubepods/burstable/pod8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a/` + hexD + `",cgroup="/kubepods/burstable/pod8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a/` + hexD + `",container_id="containerd://` + hexD + `",pod_uid="8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a",qos_class="burstable"} 1`,
		},
	}
	for _, h := range hosts {
		lines, ok := want[h.name]
		if !ok {
			continue
		}
		t.Run(h.name, func(t *testing.T) {
			env, err := NewEnv(installHost(t, h), discardLogger())
			if err != nil {
				t.Fatal(err)
			}
			c, _ := newBindingCollector(env)
			got := scrapeText(t, env, map[string]Collector{"binding": c})
			for _, l := range lines {
				if !strings.Contains(got, l+"\n") {
					t.Errorf("missing %s\nin:\n%s", l, got)
				}
			}
			if strings.Contains(got, `cgroup="/system.slice/containerd.service"`) {
				t.Error("an unlimited service got an binding limit")
			}
		})
	}
}
