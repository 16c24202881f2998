// Package examples validates the deployment examples under examples/ and generates the
// Kubernetes manifests that embed the mixin's rendered output (PrometheusRule, dashboards
// ConfigMaps), so that they cannot drift from alerts/*.yaml and dashboards/*.json.
package examples

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// Generated files, relative to the repository root.
const (
	PrometheusRuleFile = "examples/kubernetes/prometheusrule.yaml"
	DashboardsFile     = "examples/kubernetes/dashboards-configmap.yaml"
)

const header = "# Generated from %s by `make examples` (test/examples/cmd/genk8s); do not edit.\n"

var commonLabels = map[string]string{"app.kubernetes.io/name": "quota-exporter"}

// RuleFiles lists the rendered rule files in the order their groups go into the PrometheusRule.
func RuleFiles(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, "alerts", "*.yaml"))
	sort.Strings(files)
	return files, err
}

// ReadRuleGroups strictly decodes a Prometheus rule file into the operator's RuleGroup type,
// whose fields mirror the rule file format.
func ReadRuleGroups(path string) ([]monitoringv1.RuleGroup, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	if err := unmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f.Groups, nil
}

// Generate returns the generated files (path relative to root -> content).
func Generate(root string) (map[string][]byte, error) {
	out := map[string][]byte{}
	ruleFiles, err := RuleFiles(root)
	if err != nil {
		return nil, err
	}
	if len(ruleFiles) == 0 {
		return nil, fmt.Errorf("no rendered rules in %s/alerts (run make mixin)", root)
	}
	rule := monitoringv1.PrometheusRule{
		TypeMeta: metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: "PrometheusRule"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "quota-exporter",
			// kube-prometheus's Prometheus selects rules by these labels; adjust for yours.
			Labels: merge(commonLabels, map[string]string{"prometheus": "k8s", "role": "alert-rules"}),
		},
	}
	var names []string
	for _, f := range ruleFiles {
		groups, err := ReadRuleGroups(f)
		if err != nil {
			return nil, err
		}
		rule.Spec.Groups = append(rule.Spec.Groups, groups...)
		names = append(names, rel(root, f))
	}
	b, err := toYAML(rule)
	if err != nil {
		return nil, err
	}
	out[PrometheusRuleFile] = append([]byte(fmt.Sprintf(header, strings.Join(names, ", "))), b...)

	dashboards, err := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	if err != nil {
		return nil, err
	}
	if len(dashboards) == 0 {
		return nil, fmt.Errorf("no rendered dashboards in %s/dashboards (run make mixin)", root)
	}
	sort.Strings(dashboards)
	var docs [][]byte
	for _, d := range dashboards {
		content, err := os.ReadFile(d)
		if err != nil {
			return nil, err
		}
		if !json.Valid(content) {
			return nil, fmt.Errorf("%s: not valid JSON", d)
		}
		base := filepath.Base(d)
		// One ConfigMap per dashboard keeps each well below the 256 KiB limit of kubectl
		// apply's last-applied annotation.
		cm := corev1.ConfigMap{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "quota-exporter-dashboard-" + strings.TrimPrefix(strings.TrimSuffix(base, ".json"), "quota-"),
				// The Grafana sidecar (kube-prometheus-stack, grafana helm chart) loads
				// ConfigMaps with this label; the annotation names the folder where supported.
				Labels:      merge(commonLabels, map[string]string{"grafana_dashboard": "1"}),
				Annotations: map[string]string{"grafana_folder": "quota-exporter"},
			},
			Data: map[string]string{base: string(content)},
		}
		b, err := toYAML(cm)
		if err != nil {
			return nil, err
		}
		docs = append(docs, b)
	}
	out[DashboardsFile] = append([]byte(fmt.Sprintf(header, "dashboards/*.json")),
		bytes.Join(docs, []byte("---\n"))...)
	return out, nil
}

// toYAML marshals through JSON (so the API types' json tags and omitempty rules apply) and
// re-emits with yaml.v3 in block style, so expressions and dashboards stay readable.
func toYAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(j, &n); err != nil {
		return nil, err
	}
	plain(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// plain drops the JSON flow/quoted styles; yaml.v3 then quotes only where needed and uses
// literal blocks for multi-line strings.
func plain(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plain(c)
	}
}

func merge(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

func rel(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

// unmarshalStrict decodes YAML into v rejecting unknown, duplicate and miscased fields
// (sigs.k8s.io/yaml.UnmarshalStrict alone matches field names case-insensitively).
func unmarshalStrict(b []byte, v any) error {
	j, err := sigsyaml.YAMLToJSONStrict(b)
	if err != nil {
		return err
	}
	strictErrs, err := sigsjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}
