//go:build linux

package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
)

var (
	cgroupsSkippedDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_cgroups_skipped",
		"quota_exporter: cgroups the last discovery found and does not export, by reason: below_container (a cgroup "+
			"below a container's that the runtime did not make, e.g. a tenant's: its processes count as the container's, "+
			"one log line), runtime_subgroup (crun's \"container\" subgroup of a container's scope: its processes are the "+
			"container's), conmon (CRI-O's container monitors), unlinked (a container the kubelet has not linked in its "+
			"log directory yet, held back for at most a minute so that its series carry its name from the first).", []string{"reason"}, nil))
	hostPIDNamespaceDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_host_pid_namespace",
		"quota_exporter: 1 when the exporter runs in the host's PID namespace (hostPID); 0: cgroup.procs hides the "+
			"host's processes: a cgroup with neither a limit nor a Kubernetes or Docker path is not found, and the "+
			"host's processes have no per-process series.", nil, nil))
)

// DiscoveryStats exports what the cgroup source's last walk left out and whether it sees the
// host's processes; register it with the exporter's own registry.
type DiscoveryStats struct {
	cgroups *cgroups.Source
}

func (d DiscoveryStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- cgroupsSkippedDesc
	ch <- hostPIDNamespaceDesc
}

func (d DiscoveryStats) Collect(ch chan<- prometheus.Metric) {
	host := 0.0
	if d.cgroups.HostPIDNamespace() {
		host = 1
	}
	ch <- prometheus.MustNewConstMetric(hostPIDNamespaceDesc, prometheus.GaugeValue, host)
	snap := d.cgroups.Latest()
	if snap == nil {
		return
	}
	sk := snap.Skipped
	for reason, n := range map[string]int{"below_container": sk.BelowContainer, "runtime_subgroup": sk.RuntimeSubgroups, "conmon": sk.Conmon, "unlinked": len(snap.Unlinked)} {
		ch <- prometheus.MustNewConstMetric(cgroupsSkippedDesc, prometheus.GaugeValue, float64(n), reason)
	}
}
