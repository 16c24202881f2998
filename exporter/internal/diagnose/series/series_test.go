//go:build linux

package series

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// registered: every metric the collectors can emit, with its labels and type, from
// docs/metrics.md: generated from the descriptors the collectors register, and kept equal to
// them by collector's TestMetricsDoc.
func registered(t *testing.T) (labels map[string][]string, types map[string]string) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	labels, types = map[string][]string{}, map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) > 2 && strings.HasPrefix(cells[0], "| `") {
			name := strings.Trim(cells[0], "| `")
			types[name] = cells[1]
			labels[name] = strings.Split(cells[2], ",")
		}
	}
	if len(labels) == 0 {
		t.Fatal("no metric in docs/metrics.md")
	}
	return labels, types
}

// TestTableMatchesCollectors: every metric diagnose reads is one the collectors register,
// with the type its Kind assumes and the labels diagnose reads: renaming a metric or a
// label in a collector fails here, not silently in a diagnosis.
func TestTableMatchesCollectors(t *testing.T) {
	reg, types := registered(t)
	want := map[Kind]string{Counter: "counter", Gauge: "gauge", Info: "gauge", Histogram: "histogram"}
	seen := map[string]bool{}
	for _, m := range Table {
		if seen[m.Name] {
			t.Errorf("%s: twice in the table", m.Name)
		}
		seen[m.Name] = true
		labels, ok := reg[m.Name]
		if !ok {
			t.Errorf("%s: no collector registers it", m.Name)
			continue
		}
		if types[m.Name] != want[m.Kind] {
			t.Errorf("%s: docs/metrics.md says %q, the table assumes %q", m.Name, types[m.Name], want[m.Kind])
		}
		need := append([]string{}, m.Labels...)
		if !strings.HasPrefix(m.Name, "quota_exporter_") {
			need = append(need, "cgroup") // every workload series is keyed by its cgroup
		}
		for _, prefix := range []string{"quota_process_", "quota_jvm_", "quota_go_"} {
			if strings.HasPrefix(m.Name, prefix) {
				need = append(need, "process")
			}
		}
		for _, l := range need {
			if !slices.Contains(labels, l) {
				t.Errorf("%s: diagnose reads label %q, the collector's labels are %v", m.Name, l, labels)
			}
		}
		if m.Modes == 0 || m.Use == "" {
			t.Errorf("%s: no mode or no use", m.Name)
		}
	}
}
