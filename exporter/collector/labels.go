package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
)

// cgroupLabels identify a cgroup on every per-cgroup series. pod_uid, container_id and
// qos_class are empty (absent) where the path does not show them.
var cgroupLabels = []string{"cgroup", "pod_uid", "container_id", "qos_class"}

func cgroupLabelValues(cg cgroupfs.Cgroup, extra ...string) []string {
	return append([]string{cg.Path, cg.Identity.PodUID, cg.Identity.ContainerID, cg.Identity.QoSClass}, extra...)
}

func newCgroupDesc(name, help string, extra ...string) *prometheus.Desc {
	return document(prometheus.NewDesc(namespace+"_"+name, help, append(append([]string{}, cgroupLabels...), extra...), nil))
}

// documented lists every descriptor the exporter can emit, for docs/metrics.md and the
// mixin's check that it uses only exported names. Filled at init, read-only afterwards.
var documented []*prometheus.Desc

func document(d *prometheus.Desc) *prometheus.Desc {
	documented = append(documented, d)
	return d
}

// emitter sends const metrics for one cgroup.
type emitter struct {
	ch     chan<- prometheus.Metric
	labels []string
}

func (e emitter) gauge(d *prometheus.Desc, v float64, extra ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(e.labels, extra...)...)
}

func (e emitter) counter(d *prometheus.Desc, v float64, extra ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append(e.labels, extra...)...)
}
