package examples

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	securityv1 "github.com/openshift/api/security/v1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsyaml "sigs.k8s.io/yaml"
)

// Manifests holds Kubernetes objects decoded strictly into their API types, by kind: the
// kustomize examples and the Helm chart's rendered output (test/chart) alike.
type Manifests struct {
	DaemonSets          []appsv1.DaemonSet
	ServiceAccounts     []corev1.ServiceAccount
	Services            []corev1.Service
	ConfigMaps          []corev1.ConfigMap
	Secrets             []corev1.Secret
	NetworkPolicies     []networkingv1.NetworkPolicy
	PodMonitors         []monitoringv1.PodMonitor
	ServiceMonitors     []monitoringv1.ServiceMonitor
	PrometheusRules     []monitoringv1.PrometheusRule
	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	Roles               []rbacv1.Role
	RoleBindings        []rbacv1.RoleBinding
	SecurityConstraints []securityv1.SecurityContextConstraints
	// Metas holds every decoded object's metadata, in order.
	Metas []metav1.ObjectMeta
}

// Decode strictly decodes one YAML document into the type of its apiVersion and kind (the way
// the API server's strict field validation does) and appends it; a kind without a Go type here
// is an error.
func (m *Manifests) Decode(doc []byte) error {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := sigsyaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var err error
	switch tm.APIVersion + "/" + tm.Kind {
	case "apps/v1/DaemonSet":
		m.DaemonSets, err = decodeAppend(doc, m.DaemonSets)
	case "v1/ServiceAccount":
		m.ServiceAccounts, err = decodeAppend(doc, m.ServiceAccounts)
	case "v1/Service":
		m.Services, err = decodeAppend(doc, m.Services)
	case "v1/ConfigMap":
		m.ConfigMaps, err = decodeAppend(doc, m.ConfigMaps)
	case "v1/Secret":
		m.Secrets, err = decodeAppend(doc, m.Secrets)
	case "networking.k8s.io/v1/NetworkPolicy":
		m.NetworkPolicies, err = decodeAppend(doc, m.NetworkPolicies)
	// Azure Monitor's managed Prometheus reads its own group, with the same types.
	case "monitoring.coreos.com/v1/PodMonitor", "azmonitoring.coreos.com/v1/PodMonitor":
		m.PodMonitors, err = decodeAppend(doc, m.PodMonitors)
	case "monitoring.coreos.com/v1/ServiceMonitor", "azmonitoring.coreos.com/v1/ServiceMonitor":
		m.ServiceMonitors, err = decodeAppend(doc, m.ServiceMonitors)
	case "monitoring.coreos.com/v1/PrometheusRule":
		m.PrometheusRules, err = decodeAppend(doc, m.PrometheusRules)
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		m.ClusterRoles, err = decodeAppend(doc, m.ClusterRoles)
	case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
		m.ClusterRoleBindings, err = decodeAppend(doc, m.ClusterRoleBindings)
	case "rbac.authorization.k8s.io/v1/Role":
		m.Roles, err = decodeAppend(doc, m.Roles)
	case "rbac.authorization.k8s.io/v1/RoleBinding":
		m.RoleBindings, err = decodeAppend(doc, m.RoleBindings)
	case "security.openshift.io/v1/SecurityContextConstraints":
		m.SecurityConstraints, err = decodeAppend(doc, m.SecurityConstraints)
	default:
		err = fmt.Errorf("no Go type registered for this kind in the test")
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := sigsyaml.Unmarshal(doc, &meta); err != nil {
		return err
	}
	m.Metas = append(m.Metas, meta.Metadata)
	return nil
}

func decodeAppend[T any](doc []byte, list []T) ([]T, error) {
	var v T
	if err := unmarshalStrict(doc, &v); err != nil {
		return list, err
	}
	return append(list, v), nil
}

// SplitDocs splits a multi-document YAML stream (kubectl kustomize, helm template) into its
// documents, dropping empty and comment-only ones.
func SplitDocs(b []byte) [][]byte { return splitDocs(b) }

// splitDocs splits a multi-document YAML stream at "---" lines, dropping empty and
// comment-only documents. Each document keeps its final newline (a literal block's last
// line break belongs to the block).
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	flush := func() {
		for _, line := range strings.Split(string(cur), "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				docs = append(docs, cur)
				break
			}
		}
		cur = nil
	}
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if s := strings.TrimRight(string(line), "\r\n"); s == "---" || strings.HasPrefix(s, "--- ") {
			flush()
			continue
		}
		cur = append(cur, line...)
	}
	flush()
	return docs
}

// CheckNames applies the API server's rules for names and labels that a strict decode cannot see:
// object names are DNS-1123 subdomains (Services DNS-1035 labels: they become DNS names), label
// keys and values valid, ConfigMap keys valid keys. Long release names must be truncated by the
// templates, not refused by the API server.
func CheckNames(t testing.TB, m Manifests) {
	t.Helper()
	for _, meta := range m.Metas {
		for _, msg := range validation.IsDNS1123Subdomain(meta.Name) {
			t.Errorf("name %q: %s", meta.Name, msg)
		}
		for k, v := range meta.Labels {
			for _, msg := range append(content.IsLabelKey(k), content.IsLabelValue(v)...) {
				t.Errorf("%s: label %s=%q: %s", meta.Name, k, v, msg)
			}
		}
	}
	for _, s := range m.Services {
		for _, msg := range validation.IsDNS1035Label(s.Name) {
			t.Errorf("Service %q: %s", s.Name, msg)
		}
	}
	for _, cm := range m.ConfigMaps {
		for k := range cm.Data {
			for _, msg := range validation.IsConfigMapKey(k) {
				t.Errorf("ConfigMap %s key %q: %s", cm.Name, k, msg)
			}
		}
	}
}
