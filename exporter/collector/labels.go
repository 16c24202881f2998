//go:build linux

package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/processes"
	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// cgroupLabels identify a cgroup on every per-cgroup series. pod_uid, container_id and
// qos_class are absent where the path does not show them (empty values are never sent).
// namespace, pod and container are the Kubernetes names when the kubelet's log directories
// name the pod UID or container id (pod-level cgroups: namespace and pod only); a pod's
// sandbox carries container="POD".
var cgroupLabels = []string{"cgroup", "pod_uid", "container_id", "qos_class", "namespace", "pod", "container"}

func cgroupLabelValues(cg cgroupid.Cgroup, extra ...string) []string {
	id, n := cg.Identity, cg.Names
	if cg.Kind == cgroupid.KindSandbox {
		n.Container = SandboxContainer
	}
	vals := append([]string{cg.Path, id.PodUID, id.ContainerID, id.QoSClass, n.Namespace, n.Pod, n.Container}, extra...)
	for i, v := range vals {
		// Tenants choose names, versions and paths: one rule for every label value.
		vals[i] = tenantstr.Label(v)
	}
	if cg.Label != "" {
		vals[0] = cg.Label // unique among the walk's cgroups (tenantstr.Unique)
	}
	return vals
}

// descLabels are the variable label names of every descriptor newCgroupDesc and
// newProcessDesc made, in order (prometheus.Desc does not expose them): the emitters build
// label pairs from them. Filled as the package's descriptors are initialised, read-only after.
var descLabels = map[*prometheus.Desc][]string{}

// newLabelledDesc makes a descriptor without constant labels and records its label names.
func newLabelledDesc(name, help string, labels []string) *prometheus.Desc {
	d := prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
	descLabels[d] = labels
	return d
}

func newCgroupDesc(name, help string, extra ...string) *prometheus.Desc {
	return newLabelledDesc(name, help, append(append([]string{}, cgroupLabels...), extra...))
}

// processLabels extend the cgroup identity on every per-process series.
var processLabels = append(append([]string{}, cgroupLabels...), "process", "runtime")

func newProcessDesc(name, help string, extra ...string) *prometheus.Desc {
	return newLabelledDesc(name, help, append(append([]string{}, processLabels...), extra...))
}

func processLabelValues(p *processes.Process, extra ...string) []string {
	return append(cgroupLabelValues(p.Cgroup, p.Name, p.Runtime), extra...)
}
