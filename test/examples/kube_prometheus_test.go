package examples

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/quota-exporter/quota_exporter/test/jsonnettool"
	"github.com/quota-exporter/quota_exporter/test/testenv"
	corev1 "k8s.io/api/core/v1"
)

// TestKubePrometheusExample installs examples/kube-prometheus's dependencies with jb (the mixin
// from this checkout as a local source in place of its git source; kube-prometheus, which cannot
// be fetched here, replaced by the stand-in in testdata/kube-prometheus with the same interface),
// renders example.jsonnet, and decodes what comes out strictly: one PrometheusRule with the
// mixin's alert and rule groups, and one dashboard ConfigMap per dashboard in the folder.
func TestKubePrometheusExample(t *testing.T) {
	root := testenv.RepoRoot()
	example := filepath.Join(root, "examples", "kube-prometheus")
	project := t.TempDir()
	mixin, err := filepath.Rel(project, filepath.Join(root, "quota-exporter-mixin"))
	if err != nil {
		t.Fatal(err)
	}

	// The example's jsonnetfile.json, its git sources checked and swapped for what exists here.
	var file map[string]any
	if err := json.Unmarshal(readFile(t, filepath.Join(example, "jsonnetfile.json")), &file); err != nil {
		t.Fatal(err)
	}
	var subdirs []string
	for _, d := range file["dependencies"].([]any) {
		git, _ := d.(map[string]any)["source"].(map[string]any)["git"].(map[string]any)
		subdirs = append(subdirs, git["remote"].(string)+" "+git["subdir"].(string))
	}
	want := []string{
		"https://github.com/prometheus-operator/kube-prometheus.git jsonnet/kube-prometheus",
		"https://github.com/quota-exporter/quota_exporter.git quota-exporter-mixin",
	}
	if !reflect.DeepEqual(subdirs, want) {
		t.Fatalf("examples/kube-prometheus/jsonnetfile.json depends on %q, want %q", subdirs, want)
	}
	file["dependencies"] = []any{map[string]any{"source": map[string]any{"local": map[string]any{"directory": mixin}}, "version": ""}}
	b, _ := json.Marshal(file)
	if err := os.WriteFile(filepath.Join(project, "jsonnetfile.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := jsonnettool.Run(root, project, "jb", "install"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "test", "examples", "testdata", "kube-prometheus"), filepath.Join(project, "vendor", "kube-prometheus")); err != nil {
		t.Fatal(err)
	}
	out, err := jsonnettool.Run(root, project, "jsonnet", "-J", "vendor", filepath.Join(example, "example.jsonnet"))
	if err != nil {
		t.Fatal(err)
	}
	var manifests map[string]json.RawMessage
	if err := json.Unmarshal(out, &manifests); err != nil {
		t.Fatal(err)
	}

	var rule monitoringv1.PrometheusRule
	if err := unmarshalStrict(manifests["quota-exporter-prometheusRule"], &rule); err != nil {
		t.Fatalf("quota-exporter-prometheusRule: %v", err)
	}
	if rule.Kind != "PrometheusRule" || rule.Name != "quota-exporter" || rule.Namespace != "monitoring" || rule.Labels["prometheus"] != "k8s" {
		t.Errorf("PrometheusRule %s %s/%s labels %v", rule.Kind, rule.Namespace, rule.Name, rule.Labels)
	}
	var groups []monitoringv1.RuleGroup // kube-prometheus puts the alerts first, then the rules
	for _, f := range []string{"quota-alerts.yaml", "quota-rules.yaml"} {
		g, err := ReadRuleGroups(filepath.Join(root, "alerts", f))
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, g...)
	}
	if got := trimExprs(rule.Spec.Groups); len(got) == 0 || !reflect.DeepEqual(got, trimExprs(groups)) {
		t.Errorf("the PrometheusRule's %d groups differ from alerts/quota-alerts.yaml + alerts/quota-rules.yaml (%d)", len(got), len(groups))
	}

	var list corev1.ConfigMapList
	if err := unmarshalStrict(manifests["grafana-dashboardDefinitions"], &list); err != nil {
		t.Fatalf("grafana-dashboardDefinitions: %v", err)
	}
	dashboards, _ := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	require(t, len(dashboards) > 0, "dashboards/*.json not rendered yet (make mixin)")
	got := map[string]string{}
	for _, cm := range list.Items {
		for k, v := range cm.Data {
			got[k] = v
			if !strings.HasPrefix(cm.Name, "grafana-dashboard-quota-exporter-") {
				t.Errorf("ConfigMap %s: want the folder (quota-exporter) in its name", cm.Name)
			}
		}
	}
	if len(got) != len(dashboards) {
		t.Errorf("%d dashboards in ConfigMaps, %d in dashboards/", len(got), len(dashboards))
	}
	for _, d := range dashboards {
		var a, b any
		if err := json.Unmarshal([]byte(got[filepath.Base(d)]), &a); err != nil {
			t.Errorf("%s: %v", filepath.Base(d), err)
			continue
		}
		_ = json.Unmarshal(readFile(t, d), &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s in the kube-prometheus build differs from dashboards/", filepath.Base(d))
		}
	}
	if !strings.Contains(string(manifests["grafana-dashboardSources"]), `\"folder\": \"Quota exporter\"`) {
		t.Errorf("grafana-dashboardSources has no folder \"Quota exporter\": %s", manifests["grafana-dashboardSources"])
	}
}

// trimExprs drops trailing newlines of rule expressions: a YAML literal block keeps one, the
// mixin's expressions may end in more.
func trimExprs(groups []monitoringv1.RuleGroup) []monitoringv1.RuleGroup {
	out := make([]monitoringv1.RuleGroup, len(groups))
	for i, g := range groups {
		out[i] = g
		out[i].Rules = append([]monitoringv1.Rule(nil), g.Rules...)
		for j := range out[i].Rules {
			out[i].Rules[j].Expr.StrVal = strings.TrimRight(out[i].Rules[j].Expr.StrVal, "\n")
		}
	}
	return out
}
