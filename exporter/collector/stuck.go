//go:build linux

package collector

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

var stuckReadsDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_stuck_reads",
	"quota_exporter: reads of kernel files that did not return within their budget and have not returned since, by collector and kind. "+
		"The file, cgroup directory or process is skipped (counted as read_errors_total{reason=\"timeout\"}) until the read returns; "+
		"each costs one blocked OS thread.",
	[]string{"collector", "kind"}, nil))

// StuckReads exports the stuck counts of the exporter's stuck-read gates
// (quota_exporter_stuck_reads{collector,kind}).
type StuckReads struct {
	mu    sync.Mutex
	gates []*procread.Gate
}

// Gate returns a new gate named after collector, exported by s.
func (s *StuckReads) Gate(collector string) *procread.Gate {
	g := procread.NewGate(collector)
	s.mu.Lock()
	s.gates = append(s.gates, g)
	s.mu.Unlock()
	return g
}

// Describe implements prometheus.Collector.
func (s *StuckReads) Describe(ch chan<- *prometheus.Desc) { ch <- stuckReadsDesc }

// Collect implements prometheus.Collector. Gates of the same name are summed.
func (s *StuckReads) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	gates := append([]*procread.Gate(nil), s.gates...)
	s.mu.Unlock()
	sums := map[[2]string]int{}
	for _, g := range gates {
		for kind, n := range g.Stuck() {
			sums[[2]string{g.Name(), kind}] += n
		}
	}
	for k, n := range sums {
		ch <- prometheus.MustNewConstMetric(stuckReadsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}
