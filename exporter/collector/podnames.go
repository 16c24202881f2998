//go:build linux

package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/kubenames"
)

var (
	podNamesRefreshesDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_kubenames_refreshes_total",
		"quota_exporter: re-reads of the kubelet's log directories (--path.podlogs) that name pods and containers.", nil, nil))
	podNamesReadErrorsDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_kubenames_read_errors_total",
		"quota_exporter: failed reads of <podlogs>/pods or <podlogs>/containers (the names read before are kept).", nil, nil))
	podNamesMalformedDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_kubenames_malformed_entries_total",
		"quota_exporter: entries of the kubelet's log directories skipped because their names are not kubelet names.", nil, nil))
	podNamesTruncatedDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_kubenames_truncated_entries_total",
		"quota_exporter: entries dropped because the directories held more than the resolver keeps.", nil, nil))
	podNamesEntriesDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_kubenames_entries",
		"quota_exporter: pods and containers the exporter can name.", []string{"kind"}, nil))
)

// PodNames gives cgroups their Kubernetes names (namespace, pod, container) from the
// kubelet's log directories, and exports the resolver's counters. The resolver refreshes
// on its own clock (one readdir of each directory every 30 s, sooner after a miss).
type PodNames struct {
	r *kubenames.Resolver
}

// newPodNames returns nil when podLogs is "": no names.
func newPodNames(podLogs string) *PodNames {
	if podLogs == "" {
		return nil
	}
	return &PodNames{r: kubenames.New(podLogs, kubenames.Options{})}
}

// Name fills cg's Kubernetes names from its container id or, for pod-level cgroups, its pod UID.
func (n *PodNames) Name(cg *cgroupfs.Cgroup) {
	if id := cg.Identity.ContainerID; id != "" {
		if c, ok := n.r.Container(id); ok {
			cg.Names = cgroupfs.KubeNames{Namespace: c.Namespace, Pod: c.Pod, Container: c.Name}
			return
		}
	}
	if uid := cg.Identity.PodUID; uid != "" {
		if p, ok := n.r.Pod(uid); ok {
			cg.Names = cgroupfs.KubeNames{Namespace: p.Namespace, Pod: p.Name}
		}
	}
}

// Describe and Collect export the resolver's counters (nil: none).
func (n *PodNames) Describe(ch chan<- *prometheus.Desc) {
	if n == nil {
		return
	}
	for _, d := range []*prometheus.Desc{podNamesRefreshesDesc, podNamesReadErrorsDesc, podNamesMalformedDesc, podNamesTruncatedDesc, podNamesEntriesDesc} {
		ch <- d
	}
}

func (n *PodNames) Collect(ch chan<- prometheus.Metric) {
	if n == nil {
		return
	}
	st := n.r.Stats()
	ch <- prometheus.MustNewConstMetric(podNamesRefreshesDesc, prometheus.CounterValue, float64(st.Refreshes))
	ch <- prometheus.MustNewConstMetric(podNamesReadErrorsDesc, prometheus.CounterValue, float64(st.ReadErrors))
	ch <- prometheus.MustNewConstMetric(podNamesMalformedDesc, prometheus.CounterValue, float64(st.Malformed))
	ch <- prometheus.MustNewConstMetric(podNamesTruncatedDesc, prometheus.CounterValue, float64(st.Truncated))
	ch <- prometheus.MustNewConstMetric(podNamesEntriesDesc, prometheus.GaugeValue, float64(st.Pods), "pod")
	ch <- prometheus.MustNewConstMetric(podNamesEntriesDesc, prometheus.GaugeValue, float64(st.Containers), "container")
}
