//go:build linux

package collector

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// Factory builds a collector from the shared environment.
type Factory func(env *Env) (Collector, error)

type registration struct {
	defaultEnabled bool
	help           string
	factory        Factory
	descs          []*prometheus.Desc // every metric the collector can emit
}

// registry holds the collectors by flag name. It is the one package-level table left: filled
// by the init functions of this package's collector files (node_exporter's pattern, so adding
// a collector is one file) and only read afterwards.
var registry = map[string]registration{}

// selfDescs are the exporter's own metrics, emitted whatever collectors run (read errors,
// build info, scrape duration and success). Filled at init, read-only afterwards.
var selfDescs []*prometheus.Desc

// register adds a collector with the descriptors of every metric it emits: docs/metrics.md
// is generated from them.
func register(name string, defaultEnabled bool, help string, f Factory, descs ...*prometheus.Desc) {
	if _, dup := registry[name]; dup {
		panic("collector registered twice: " + name)
	}
	registry[name] = registration{defaultEnabled, help, f, descs}
}

// Available lists the registered collectors' names, sorted.
func Available() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultEnabled reports whether a collector runs unless switched off.
func DefaultEnabled(name string) bool { return registry[name].defaultEnabled }

// Help is the one-line description shown with the collector's flag.
func Help(name string) string { return registry[name].help }

// selfMetric lists one of the exporter's own metrics for docs/metrics.md.
func selfMetric(d *prometheus.Desc) *prometheus.Desc {
	selfDescs = append(selfDescs, d)
	return d
}
