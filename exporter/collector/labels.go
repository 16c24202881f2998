//go:build linux

package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/source"
	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// cgroupLabels identify a cgroup on every per-cgroup series. pod_uid, container_id and
// qos_class are absent where the path does not show them (empty values are never sent).
// namespace, pod and container are the Kubernetes names when the kubelet's log directories
// name the pod UID or container id (pod-level cgroups: namespace and pod only); a pod's
// sandbox carries container="POD".
var cgroupLabels = []string{"cgroup", "pod_uid", "container_id", "qos_class", "namespace", "pod", "container"}

func cgroupLabelValues(cg cgroupfs.Cgroup, extra ...string) []string {
	id, n := cg.Identity, cg.Names
	if cg.Kind == cgroupfs.KindSandbox {
		n.Container = SandboxContainer
	}
	vals := append([]string{cg.Path, id.PodUID, id.ContainerID, id.QoSClass, n.Namespace, n.Pod, n.Container}, extra...)
	for i, v := range vals {
		// Tenants choose names, versions and paths: one rule for every label value.
		vals[i] = tenantstr.Label(v)
	}
	return vals
}

func newCgroupDesc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_"+name, help, append(append([]string{}, cgroupLabels...), extra...), nil)
}

// processLabels extend the cgroup identity on every per-process series.
var processLabels = append(append([]string{}, cgroupLabels...), "process", "runtime")

func newProcessDesc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_"+name, help, append(append([]string{}, processLabels...), extra...), nil)
}

func processLabelValues(p *source.Process, extra ...string) []string {
	return append(cgroupLabelValues(p.Cgroup, p.Name, p.Runtime), extra...)
}
