//go:build linux

package collector

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// Exported for tests only: the product code does not use these.

// Bind returns a prometheus.Collector that runs the set under ctx (the scrape's deadline).
func (s *Set) Bind(ctx context.Context) prometheus.Collector { return boundSet{s, ctx} }

// Descriptors returns the metrics a collector emits; "" gives the exporter's self-metrics.
func Descriptors(name string) []*prometheus.Desc {
	if name == "" {
		return selfDescs
	}
	return registry[name].descs
}
