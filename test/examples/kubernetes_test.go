package examples

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// kustomization is the subset of kustomize's Kustomization used here; decoding it strictly
// catches misspelt fields without pulling in kustomize's module.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images"`
}

// decodeStrict decodes one document into v the way the API server's strict field validation
// does: unknown fields, duplicate fields and fields in the wrong case (hostPid for hostPID,
// which encoding/json and sigs.k8s.io/yaml.UnmarshalStrict accept) are errors.
func decodeStrict(doc []byte, v any) error {
	return unmarshalStrict(doc, v)
}

// loadManifests strictly decodes every document of every resource of the kustomization.
func loadManifests(t *testing.T) (kustomization, Manifests) {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), "examples", "kubernetes")
	var k kustomization
	if err := decodeStrict(readFile(t, filepath.Join(dir, "kustomization.yaml")), &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml: apiVersion/kind = %q/%q", k.APIVersion, k.Kind)
	}
	// Every YAML file in the directory must be a resource, and every resource a file.
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && !slices.Contains(k.Resources, b) {
			t.Errorf("%s is not listed in kustomization.yaml resources", b)
		}
	}
	var m Manifests
	for _, r := range k.Resources {
		path := filepath.Join(dir, r)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("kustomization resource %s: %v", r, err)
			continue
		}
		for i, doc := range splitDocs(b) {
			if err := m.Decode(doc); err != nil {
				t.Errorf("%s doc %d: %v", r, i, err)
			}
		}
	}
	return k, m
}

func TestStrictDecodeRejectsUnknownFields(t *testing.T) {
	// Guards the guard: misspelt, miscased and duplicate fields must fail the strict decode.
	for _, field := range []string{"hostPid: true", "hostPIDs: true", "hostPID: true\n      hostPID: false"} {
		doc := []byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      " + field + "\n")
		var ds appsv1.DaemonSet
		if err := decodeStrict(doc, &ds); err == nil {
			t.Errorf("strict decoding accepted %q", field)
		}
	}
}

func TestKubernetesManifests(t *testing.T) {
	_, m := loadManifests(t)
	if len(m.DaemonSets) != 1 || len(m.ServiceAccounts) != 1 || len(m.Services) != 1 ||
		len(m.PodMonitors) != 1 || len(m.PrometheusRules) != 1 || len(m.ConfigMaps) == 0 || len(m.NetworkPolicies) != 1 {
		t.Fatalf("want 1 DaemonSet, ServiceAccount, Service, PodMonitor, PrometheusRule, NetworkPolicy and dashboards ConfigMaps; got %d %d %d %d %d %d %d",
			len(m.DaemonSets), len(m.ServiceAccounts), len(m.Services), len(m.PodMonitors), len(m.PrometheusRules), len(m.NetworkPolicies), len(m.ConfigMaps))
	}
	ds := m.DaemonSets[0]
	pod := ds.Spec.Template.Spec
	if pod.ServiceAccountName != m.ServiceAccounts[0].Name {
		t.Errorf("DaemonSet serviceAccountName %q, ServiceAccount %q", pod.ServiceAccountName, m.ServiceAccounts[0].Name)
	}
	podLabels := ds.Spec.Template.Labels
	for k, v := range ds.Spec.Selector.MatchLabels {
		if podLabels[k] != v {
			t.Errorf("DaemonSet selector %s=%s does not match its pod template", k, v)
		}
	}
	svc := m.Services[0]
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service is not headless: clusterIP %q", svc.Spec.ClusterIP)
	}
	for k, v := range svc.Spec.Selector {
		if podLabels[k] != v {
			t.Errorf("Service selector %s=%s does not match the exporter pods", k, v)
		}
	}
	pm := m.PodMonitors[0]
	for k, v := range pm.Spec.Selector.MatchLabels {
		if podLabels[k] != v {
			t.Errorf("PodMonitor selector %s=%s does not match the exporter pods", k, v)
		}
	}
	// The mixin selects job="quota-exporter": the job label comes from the pod label jobLabel names.
	if got := podLabels[pm.Spec.JobLabel]; got != "quota-exporter" {
		t.Errorf("PodMonitor jobLabel %q gives job=%q, want quota-exporter", pm.Spec.JobLabel, got)
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].Port == nil ||
		*pm.Spec.PodMetricsEndpoints[0].Port != "metrics" {
		t.Errorf("PodMonitor must scrape the port named metrics")
	}
	CheckTargetLabels(t, pm.Spec.PodMetricsEndpoints[0].RelabelConfigs, "quota-exporter")
	CheckNetworkPolicy(t, m.NetworkPolicies[0], podLabels, "metrics", []string{"monitoring"})
	CheckNames(t, m)
}

func TestDaemonSetSecurity(t *testing.T) {
	_, m := loadManifests(t)
	if len(m.DaemonSets) != 1 {
		t.Fatalf("want one DaemonSet, got %d", len(m.DaemonSets))
	}
	pod := m.DaemonSets[0].Spec.Template.Spec
	CheckExporterPod(t, pod, PodWant{})
	c := pod.Containers[0]
	// The released image of this checkout's VERSION, never a moving tag.
	version, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "ghcr.io/quota-exporter/quota-exporter:" + strings.TrimSpace(string(version)); c.Image != want {
		t.Errorf("image %q, want %q", c.Image, want)
	}
	if !slices.Contains(c.Args, "--web.listen-address=:10137") {
		t.Error("args lack --web.listen-address=:10137")
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 10137 || c.Ports[0].Name != "metrics" {
		t.Errorf("want one port metrics/10137, got %+v", c.Ports)
	}
	CheckResources(t, c.Resources)
	if cpu := c.Resources.Limits[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("100m")) < 0 {
		t.Errorf("CPU limit %s is too tight for a scrape every 5 s", cpu.String())
	}
	// The sub-mounts of /sys/fs/cgroup are the cgroup trees themselves: read-only must reach them.
	for _, vm := range c.VolumeMounts {
		if vm.RecursiveReadOnly == nil || *vm.RecursiveReadOnly != corev1.RecursiveReadOnlyIfPossible {
			t.Errorf("mount %s: want recursiveReadOnly IfPossible", vm.Name)
		}
	}
}

func TestPrometheusRuleMatchesRenderedRules(t *testing.T) {
	root := testenv.RepoRoot()
	files, _ := RuleFiles(root)
	require(t, len(files) > 0, "alerts/*.yaml not rendered yet (make mixin)")
	var want []monitoringv1.RuleGroup
	for _, f := range files {
		g, err := ReadRuleGroups(f)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, g...)
	}
	_, m := loadManifests(t)
	if len(m.PrometheusRules) != 1 {
		t.Fatalf("want one PrometheusRule, got %d", len(m.PrometheusRules))
	}
	got := m.PrometheusRules[0].Spec.Groups
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PrometheusRule groups differ from alerts/*.yaml: run make examples")
	}
	if len(got) == 0 {
		t.Error("PrometheusRule has no groups")
	}
}

func TestDashboardConfigMapsMatchRenderedDashboards(t *testing.T) {
	dashboards, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "dashboards", "*.json"))
	require(t, len(dashboards) > 0, "dashboards/*.json not rendered yet (make mixin)")
	_, m := loadManifests(t)
	CheckDashboardConfigMaps(t, testenv.RepoRoot(), m.ConfigMaps)
}

func TestGeneratedManifestsUpToDate(t *testing.T) {
	root := testenv.RepoRoot()
	files, _ := RuleFiles(root)
	require(t, len(files) > 0, "alerts/*.yaml not rendered yet (make mixin)")
	gen, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range gen {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("%s: %v (run make examples)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make examples (cd test && go run ./examples/cmd/genk8s -root ..)", name)
		}
	}
}
