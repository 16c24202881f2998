//go:build linux

package collector

import (
	"github.com/alecthomas/kingpin/v2"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kubenames"
)

func init() {
	addFlags(func(app *kingpin.Application, f *Flags) {
		app.Flag("path.podlogs", "The host's /var/log: the kubelet's pods/ and containers/ directories there name the pods and containers (namespace, pod, container labels). Only directory names are read. Empty: no names.").Default("/var/log").StringVar(&f.cfg.PodLogsPath)
	})
}

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

// PodNames is the cgroup source's namer (kubenames.Namer: names from the kubelet's log
// directories, sandboxes told from containers) and exports its resolver's counters.
type PodNames struct{ *kubenames.Namer }

// newPodNames returns nil when podLogs is "": no names.
func newPodNames(podLogs, procPath string) *PodNames {
	n := kubenames.NewNamer(podLogs, procPath)
	if n == nil {
		return nil
	}
	return &PodNames{n}
}

// SandboxContainer is the container name a sandbox's series carry, as cAdvisor and CRI-O
// name the infra container: kubernetes-mixin's container!="" and container!="POD" tell it
// from the pod's containers, and the pod's own cgroup carries no container label.
const SandboxContainer = "POD"

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
	st := n.Stats()
	ch <- prometheus.MustNewConstMetric(podNamesRefreshesDesc, prometheus.CounterValue, float64(st.Refreshes))
	ch <- prometheus.MustNewConstMetric(podNamesReadErrorsDesc, prometheus.CounterValue, float64(st.ReadErrors))
	ch <- prometheus.MustNewConstMetric(podNamesMalformedDesc, prometheus.CounterValue, float64(st.Malformed))
	ch <- prometheus.MustNewConstMetric(podNamesTruncatedDesc, prometheus.CounterValue, float64(st.Truncated))
	ch <- prometheus.MustNewConstMetric(podNamesEntriesDesc, prometheus.GaugeValue, float64(st.Pods), "pod")
	ch <- prometheus.MustNewConstMetric(podNamesEntriesDesc, prometheus.GaugeValue, float64(st.Containers), "container")
}
