package chart

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/quota-exporter/quota_exporter/test/e2e/stack"
	"github.com/quota-exporter/quota_exporter/test/internal/runner"
	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// workloadSeries is one series in the exporter's label schema (docs/metrics.md): the workload's
// own namespace, pod and container, which the target's must not replace.
const workloadSeries = `# HELP quota_cpu_limit_cores CFS bandwidth limit in CPUs (quota / period; v1 cpu.cfs_quota_us, v2 cpu.max). Absent when unlimited.
# TYPE quota_cpu_limit_cores gauge
quota_cpu_limit_cores{cgroup="/kubepods/burstable/pod0f1e/3c2b",pod_uid="0f1e",container_id="3c2b",qos_class="burstable",namespace="tenant-a",pod="web-1",container="app"} 2
`

// relabelYAML turns the operator's RelabelConfigs into Prometheus's relabel_config YAML.
func relabelYAML(rcs []monitoringv1.RelabelConfig) []map[string]any {
	var out []map[string]any
	for _, rc := range rcs {
		m := map[string]any{}
		if len(rc.SourceLabels) > 0 {
			var src []string
			for _, l := range rc.SourceLabels {
				src = append(src, string(l))
			}
			m["source_labels"] = src
		}
		if rc.TargetLabel != "" {
			m["target_label"] = rc.TargetLabel
		}
		if rc.Regex != "" {
			m["regex"] = rc.Regex
		}
		if rc.Replacement != nil {
			m["replacement"] = *rc.Replacement
		}
		if rc.Action != "" {
			m["action"] = strings.ToLower(rc.Action)
		}
		out = append(out, m)
	}
	return out
}

// TestPodMonitorUnderEnforcedNamespaceLabel scrapes one workload series with a real Prometheus
// through the chart's PodMonitor as the Prometheus Operator turns it into a scrape job
// (pkg/prometheus/promcfg.go, generatePodMonitorConfig: its own namespace, container, pod, job
// and endpoint target labels first, then the monitor's relabelings), three ways:
//
//   - plain: the workload keeps its namespace, pod and container, and nothing is renamed to
//     exported_* (the chart drops the exporter pod's own target labels);
//   - under a Prometheus with enforcedNamespaceLabel: namespace (OpenShift's user-workload
//     monitoring): pkg/namespacelabeler appends `target_label: namespace, replacement: <the
//     monitor's namespace>` to the relabelings and to the metric relabelings, after the
//     monitor's own. The target gets namespace=monitoring again, so at the scrape the series'
//     own namespace is renamed exported_namespace;
//   - the same with honor_labels true: the series keeps its namespace at the scrape, and the
//     appended metric relabeling then overwrites it: the workload's namespace is gone.
//
// docs/platforms.md ("OpenShift") states these results; pod, container, pod_uid and cgroup
// survive all three.
func TestPodMonitorUnderEnforcedNamespaceLabel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root := testenv.RepoRoot()
	promBin, err := stack.ToolPath(ctx, root, "tools", "prometheus")
	testenv.Require(t, err == nil, fmt.Sprintf("the pinned Prometheus (tools/go.mod): %v", err))

	m, _ := render(t)
	if len(m.PodMonitors) != 1 {
		t.Fatalf("%d PodMonitors rendered", len(m.PodMonitors))
	}
	pm := m.PodMonitors[0]
	ep := pm.Spec.PodMetricsEndpoints[0]

	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, workloadSeries)
	}))
	defer exporter.Close()

	// The operator's target labels before the monitor's relabelings (promcfg.go).
	operator := []monitoringv1.RelabelConfig{
		{SourceLabels: []monitoringv1.LabelName{"__meta_kubernetes_namespace"}, TargetLabel: "namespace"},
		{SourceLabels: []monitoringv1.LabelName{"__meta_kubernetes_pod_container_name"}, TargetLabel: "container"},
		{SourceLabels: []monitoringv1.LabelName{"__meta_kubernetes_pod_name"}, TargetLabel: "pod"},
		{TargetLabel: "job", Replacement: new(pm.Namespace + "/" + pm.Name)},
		{TargetLabel: "endpoint", Replacement: new("metrics")},
	}
	// What pkg/namespacelabeler appends to both lists under enforcedNamespaceLabel: namespace.
	enforce := monitoringv1.RelabelConfig{TargetLabel: "namespace", Replacement: new(pm.Namespace)}
	job := func(name string, honorLabels, enforced bool) map[string]any {
		relabel := append(append([]monitoringv1.RelabelConfig{}, operator...), ep.RelabelConfigs...)
		metric := append([]monitoringv1.RelabelConfig{}, ep.MetricRelabelConfigs...)
		if enforced {
			relabel, metric = append(relabel, enforce), append(metric, enforce)
		}
		j := map[string]any{
			"job_name":        name,
			"honor_labels":    honorLabels,
			"scrape_interval": "1s",
			"scrape_timeout":  "1s",
			"static_configs": []map[string]any{{
				"targets": []string{strings.TrimPrefix(exporter.URL, "http://")},
				// Kubernetes service discovery's labels for the exporter pod on node <name>.
				"labels": map[string]string{
					"__meta_kubernetes_namespace":          pm.Namespace,
					"__meta_kubernetes_pod_name":           "qe-quota-exporter-x7k2p",
					"__meta_kubernetes_pod_container_name": "quota-exporter",
					"__meta_kubernetes_pod_node_name":      name,
				},
			}},
			"relabel_configs": relabelYAML(relabel),
		}
		if len(metric) > 0 {
			j["metric_relabel_configs"] = relabelYAML(metric)
		}
		return j
	}
	cfg, err := sigsyaml.Marshal(map[string]any{"scrape_configs": []map[string]any{
		job("plain", false, false), job("enforced", false, true), job("enforced-honor-labels", true, true),
	}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := runner.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "prometheus.log")
	prom, err := runner.Start("prometheus", logPath, promBin, "--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer prom.Stop(10 * time.Second)
	q := &stack.Stack{PromURL: fmt.Sprintf("http://127.0.0.1:%d", port)}

	got := map[string]map[string]string{} // instance (node) -> labels
	for deadline := time.Now().Add(2 * time.Minute); len(got) < 3; time.Sleep(time.Second) {
		if time.Now().After(deadline) || prom.Exited() {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("Prometheus scraped %d of 3 jobs: %v\n%s", len(got), got, runner.Tail(string(log), 3000))
		}
		samples, err := q.Query(ctx, "quota_cpu_limit_cores")
		if err != nil {
			continue
		}
		for _, s := range samples {
			got[s.Labels["instance"]] = s.Labels
		}
	}
	for _, c := range []struct {
		instance, namespace, exported string
	}{
		{"plain", "tenant-a", ""},
		{"enforced", pm.Namespace, "tenant-a"},
		{"enforced-honor-labels", pm.Namespace, ""},
	} {
		l := got[c.instance]
		t.Logf("%s: %v", c.instance, l)
		if l["namespace"] != c.namespace || l["exported_namespace"] != c.exported {
			t.Errorf("%s: namespace=%q exported_namespace=%q, want %q and %q", c.instance, l["namespace"], l["exported_namespace"], c.namespace, c.exported)
		}
		for k, want := range map[string]string{"pod": "web-1", "container": "app", "pod_uid": "0f1e", "job": "quota-exporter"} {
			if l[k] != want {
				t.Errorf("%s: %s=%q, want %q", c.instance, k, l[k], want)
			}
		}
		for k := range l {
			if strings.HasPrefix(k, "exported_") && k != "exported_namespace" {
				t.Errorf("%s: %s=%q: the exporter pod's own label clashed with the workload's", c.instance, k, l[k])
			}
		}
	}
}
