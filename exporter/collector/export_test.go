//go:build linux

package collector

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// Exported for tests only: the product code does not use these.

// Bind returns a prometheus.Collector that runs the set under ctx (the scrape's deadline).
func (s *Set) Bind(ctx context.Context) prometheus.Collector { return boundSet{s, ctx} }
