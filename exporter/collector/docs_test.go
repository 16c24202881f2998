package collector

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", help: "((?:[^"\\]|\\.)*)", unit: "[^"]*", constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

type docRow struct{ name, kind, labels, collector, help string }

func kindOf(name string) string {
	switch {
	case strings.HasPrefix(name, "quota_cpu_throttled_window_"), name == "quota_cpu_throttle_stall_seconds":
		return "histogram"
	case name == "quota_go_stw_pause_seconds":
		return "histogram"
	case strings.HasSuffix(name, "_total"):
		return "counter"
	}
	return "gauge"
}

func docRows(t testing.TB) []docRow {
	var rows []docRow
	add := func(collector string, descs []*prometheus.Desc) {
		for _, d := range descs {
			m := descRE.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			labels := strings.ReplaceAll(m[3], " ", "")
			rows = append(rows, docRow{m[1], kindOf(m[1]), labels, collector, strings.ReplaceAll(m[2], `\"`, `"`)})
		}
	}
	// Each metric's collector is the one that registered its descriptor.
	add("(always)", Descriptors(""))
	for _, name := range Available() {
		add(name, Descriptors(name))
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	return rows
}

func renderMetricsDoc(rows []docRow) string {
	var b strings.Builder
	b.WriteString(`# Metrics

Generated from the exporter's own metric descriptors by
` + "`go test ./exporter/collector -run TestMetricsDoc -update`" + `; a test fails when this file is stale.

Every per-cgroup series carries the identity labels ` + "`cgroup`" + ` (path from the hierarchy root),
` + "`pod_uid`" + `, ` + "`container_id`" + ` (runtime-prefixed as kube-state-metrics writes it) and ` + "`qos_class`" + `,
absent where the path does not show them, and the Kubernetes names ` + "`namespace`" + `, ` + "`pod`" + ` and
` + "`container`" + ` where the kubelet's log directories under ` + "`--path.podlogs`" + ` (default /var/log) name the pod
UID or container id (pod-level cgroups: ` + "`namespace`" + ` and ` + "`pod`" + ` only; a pod's sandbox: ` + "`container=\"POD\"`" + `,
see docs/cgroups.md for each node layout). No series carries an empty-valued
label. Per-process series add ` + "`process`" + ` (comm, or a
JVM's main class / jar, made unique within a cgroup) and ` + "`runtime`" + ` (jvm, go, other; unknown while a process's runtime
detection is blocked in the kernel, e.g. behind its mmap_lock: its stat and status series are exported meanwhile).
The PID appears only on
` + "`quota_process_info`" + `. On cgroup v1 a process is attributed to its path in the **cpu** hierarchy.

**Label values that tenants choose** (process and executable names, a Go binary's ` + "`version`" + `, a JVM's ` + "`vm`" + `,
main class or jar, cgroup and Kubernetes names) pass one rule before they are exported, the same for every label of every
series: ` + tenantstr.Rule + `. Alert descriptions and ` + "`diagnose`" + ` print the values as exported; ` + "`diagnose`" + `
also escapes them for the terminal and for Markdown.

**Series budget per container cgroup** (default flags; a container with a CPU quota and a memory limit):
**20** on cgroup v1, **24** on cgroup v2 (its 4 PSI series). cpu: limit, usage (user, system), periods, throttled
periods, throttled seconds, weight (7; plus 2 PSI on v2); memory: limit, usage, working set, RSS, cache, OOM kills
(6; plus 2 PSI on v2); binding CPU and memory limit (2); the per-second throttled-ratio histogram with buckets
le="0.5", le="0.9" and +Inf, _sum and _count (5). Series that would only repeat a default are absent: the period when it
is 0.1 s, the three burst series without a burst allowance, the cpuset size when it is every CPU of the host (a
container's own cpuset adds 1, a burst allowance 3). ` + "`--throttle.full-histograms`" + ` exports every bucket of the ratio
histogram and the per-second throttled-seconds histogram (+19 series). Process series come on top, per process with
a runtime or above ` + "`--process.min-resident`" + `. A test (TestSeriesBudget) holds the exporter to this budget.

The source of each value (kernel file or runtime data) is in its description. Collectors are switched with
` + "`--[no-]collector.<name>`" + `; "(always)" marks the exporter's self-metrics.

| metric | type | labels | collector | description |
| --- | --- | --- | --- | --- |
`)
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.name, r.kind, r.labels, r.collector, strings.ReplaceAll(r.help, "|", `\|`))
	}
	b.WriteString(`
With ` + "`--web.disable-exporter-metrics`" + ` unset the exporter also serves its own ` + "`go_*`" + `, ` + "`process_*`" + ` and
` + "`promhttp_*`" + ` metrics (client_golang).
`)
	return b.String()
}

// TestMetricsDoc keeps docs/metrics.md equal to what the descriptors say.
func TestMetricsDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "metrics.md")
	want := renderMetricsDoc(docRows(t))
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Errorf("docs/metrics.md is stale (go test ./exporter/collector -run TestMetricsDoc -update)")
	}
}

// TestGoldenNamesDocumented: every family in the golden scrapes is documented (and so is
// known to the mixin checks).
func TestGoldenNamesDocumented(t *testing.T) {
	known := map[string]bool{}
	for _, r := range docRows(t) {
		known[r.name] = true
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.golden.prom"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
				name = strings.Fields(name)[0]
				if !known[name] {
					t.Errorf("%s: %s is not documented", f, name)
				}
			}
		}
	}
}
