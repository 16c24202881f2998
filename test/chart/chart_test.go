// Package chart tests the Helm chart charts/quota-exporter: helm lint and helm template (Helm
// pinned in tools/helm/go.mod) for several value sets, every rendered object decoded strictly into
// its Kubernetes type, and the security, scheduling and monitoring properties asserted with the
// same checks as the kustomize examples (test/examples).
package chart

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/quota-exporter/quota_exporter/test/examples"
	"github.com/quota-exporter/quota_exporter/test/testenv"
)

const (
	release   = "qe"
	namespace = "monitoring"
	// The Kubernetes the value sets are rendered for (a Helm built with `go tool` reports v1.20
	// unless told; TestChartTemplateWithoutKubeVersion renders without it).
	kubeVersion = "1.37.0"
)

func chartDir(t testing.TB) string {
	return filepath.Join(testenv.RepoRoot(), "charts", "quota-exporter")
}

// helm runs the pinned Helm; the first run may build it (minutes on two cores).
func helm(t *testing.T, args ...string) string {
	t.Helper()
	root := testenv.RepoRoot()
	return examples.RunTool(t, root, 10*time.Minute, "go",
		append([]string{"tool", "-modfile=" + filepath.Join(root, "tools", "helm", "go.mod"), "helm"}, args...)...)
}

// render runs helm template with the value files (relative to the chart) and decodes every
// object strictly; it returns the objects and the output's size.
func render(t *testing.T, valueFiles ...string) (examples.Manifests, int) {
	t.Helper()
	return renderRelease(t, release, valueFiles...)
}

func renderRelease(t *testing.T, release string, valueFiles ...string) (examples.Manifests, int) {
	t.Helper()
	args := []string{"template", release, chartDir(t), "--namespace", namespace, "--kube-version", kubeVersion}
	for _, f := range valueFiles {
		args = append(args, "-f", filepath.Join(chartDir(t), f))
	}
	out := helm(t, args...)
	var m examples.Manifests
	for i, doc := range examples.SplitDocs([]byte(out)) {
		if err := m.Decode(doc); err != nil {
			t.Errorf("rendered document %d: %v\n%.400s", i, err, doc)
		}
	}
	return m, len(out)
}

type appChart struct {
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

func readChart(t *testing.T) appChart {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(t), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c appChart
	if err := sigsyaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// valueSet is one ci/*-values.yaml file and what the rendered chart must hold for it.
type valueSet struct {
	file                              string
	pod                               examples.PodWant
	podMonitor, serviceMonitor, rules bool
	tls, basicAuth                    bool
	// selectorLabels are the labels every monitor and rule carries for a Prometheus to select
	// (prometheusSelectorLabels); monitorLabels a monitor's own.
	selectorLabels, monitorLabels map[string]string
	// registry is the exporter image's registry (global.imageRegistry wins over image.registry).
	registry string
	// monitorAPIVersion: the monitors' group (Azure's managed Prometheus reads its own).
	monitorAPIVersion string
	// limits: the PodMonitor's per-scrape limits.
	limits map[string]int64
	// admitted: the namespaces the NetworkPolicy admits.
	admitted []string
	// openshift: an SCC and its use; rbacProxy: kube-rbac-proxy's RBAC and monitors over HTTPS.
	openshift, rbacProxy bool
	// podSecurity: fields the pod securityContext must have beside the collectors' (the
	// securityContext value, openshift.seLinuxType).
	podSecurity func(*corev1.PodSecurityContext) bool
}

var valueSets = []valueSet{
	{file: "", podMonitor: true, rules: true},
	{file: "ci/bpf-values.yaml", pod: examples.PodWant{BPF: true}, podMonitor: true, rules: true},
	{file: "ci/servicemonitor-values.yaml", serviceMonitor: true, rules: true, monitorLabels: map[string]string{"team": "platform"}},
	{file: "ci/web-values.yaml", pod: examples.PodWant{TCPProbes: true}, podMonitor: true, rules: true, tls: true, basicAuth: true},
	{file: "ci/tls-only-values.yaml", pod: examples.PodWant{ProbeScheme: corev1.URISchemeHTTPS}, podMonitor: true, rules: true, tls: true},
	{file: "ci/no-crds-values.yaml"},
	{file: "ci/cgroups-only-values.yaml", pod: examples.PodWant{NoProcessReaders: true}, podMonitor: true, rules: true},
	{file: "ci/openshift-values.yaml", podMonitor: true, rules: true, openshift: true,
		podSecurity: func(sc *corev1.PodSecurityContext) bool {
			return sc.SELinuxOptions != nil && sc.SELinuxOptions.Type == "spc_t"
		}},
	{file: "ci/kube-rbac-proxy-values.yaml", pod: examples.PodWant{RBACProxy: true}, podMonitor: true, rules: true, rbacProxy: true},
	{file: "ci/managed-values.yaml", pod: examples.PodWant{PriorityClass: "system-node-critical"}, podMonitor: true, rules: true,
		selectorLabels: map[string]string{"release": "kps"}, registry: "mirror.example.com",
		monitorAPIVersion: "azmonitoring.coreos.com/v1",
		limits:            map[string]int64{"sampleLimit": 200000, "labelLimit": 63, "labelNameLengthLimit": 511, "labelValueLengthLimit": 1023},
		admitted:          []string{"monitoring", "kube-system"},
		podSecurity: func(sc *corev1.PodSecurityContext) bool {
			return sc.AppArmorProfile != nil && sc.AppArmorProfile.Type == corev1.AppArmorProfileTypeLocalhost &&
				sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeLocalhost &&
				sc.RunAsUser != nil && *sc.RunAsUser == 0
		}},
}

func (v valueSet) name() string {
	if v.file == "" {
		return "defaults"
	}
	return strings.TrimSuffix(filepath.Base(v.file), "-values.yaml")
}

func TestChartLint(t *testing.T) {
	for _, v := range valueSets {
		args := []string{"lint", "--strict", chartDir(t), "--kube-version", kubeVersion}
		if v.file != "" {
			args = append(args, "-f", filepath.Join(chartDir(t), v.file))
		}
		t.Logf("%s: %s", v.name(), strings.TrimSpace(helm(t, args...)))
	}
}

func TestChartTemplate(t *testing.T) {
	chart := readChart(t)
	for _, v := range valueSets {
		t.Run(v.name(), func(t *testing.T) {
			m, size := render(t, valueFilesOf(v)...)
			t.Logf("helm template: %d bytes, %d objects", size, len(m.Metas))
			checkRendered(t, v, m, chart)
		})
	}
}

func valueFilesOf(v valueSet) []string {
	if v.file == "" {
		return nil
	}
	return []string{v.file}
}

func checkRendered(t *testing.T, v valueSet, m examples.Manifests, chart appChart) {
	if len(m.DaemonSets) != 1 || len(m.ServiceAccounts) != 1 || len(m.Services) != 1 || len(m.NetworkPolicies) != 1 {
		t.Fatalf("want one DaemonSet, ServiceAccount, Service and NetworkPolicy; got %d %d %d %d",
			len(m.DaemonSets), len(m.ServiceAccounts), len(m.Services), len(m.NetworkPolicies))
	}
	ds := m.DaemonSets[0]
	pod := ds.Spec.Template.Spec
	podLabels := ds.Spec.Template.Labels
	examples.CheckExporterPod(t, pod, v.pod)
	c := pod.Containers[0]
	examples.CheckResources(t, c.Resources)
	registry := cmp.Or(v.registry, "ghcr.io")
	if want := registry + "/quota-exporter/quota-exporter:" + chart.AppVersion; c.Image != want {
		t.Errorf("image %q, want %q (the tag defaults to the chart's appVersion)", c.Image, want)
	}
	if v.podSecurity != nil && (pod.SecurityContext == nil || !v.podSecurity(pod.SecurityContext)) {
		t.Errorf("pod securityContext %+v lacks what the values ask for", pod.SecurityContext)
	}
	for k, val := range ds.Spec.Selector.MatchLabels {
		if podLabels[k] != val {
			t.Errorf("DaemonSet selector %s=%s does not match its pod template", k, val)
		}
	}
	if sa := m.ServiceAccounts[0]; pod.ServiceAccountName != sa.Name || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount %s (automount %v) for pod serviceAccountName %s", sa.Name, sa.AutomountServiceAccountToken, pod.ServiceAccountName)
	}
	svc := m.Services[0]
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service is not headless: clusterIP %q", svc.Spec.ClusterIP)
	}
	for k, val := range svc.Spec.Selector {
		if podLabels[k] != val {
			t.Errorf("Service selector %s=%s does not match the exporter pods", k, val)
		}
	}
	admitted := v.admitted
	if admitted == nil {
		admitted = []string{"monitoring"}
	}
	examples.CheckNetworkPolicy(t, m.NetworkPolicies[0], podLabels, "metrics", admitted)
	examples.CheckNames(t, m)
	clusterScoped := map[string]bool{}
	for _, o := range m.ClusterRoles {
		clusterScoped[o.Name] = true
	}
	for _, o := range m.ClusterRoleBindings {
		clusterScoped[o.Name] = true
	}
	for _, o := range m.SecurityConstraints {
		clusterScoped[o.Name] = true
	}
	for _, obj := range m.Metas {
		if obj.Namespace == "" && clusterScoped[obj.Name] {
			continue
		}
		if obj.Namespace != namespace {
			t.Errorf("%s has namespace %q, want %q: plain kubectl apply must put it in the release's namespace", obj.Name, obj.Namespace, namespace)
		}
	}

	if got := len(m.PodMonitors); got != b2i(v.podMonitor) {
		t.Errorf("%d PodMonitors, want %d", got, b2i(v.podMonitor))
	}
	if got := len(m.ServiceMonitors); got != b2i(v.serviceMonitor) {
		t.Errorf("%d ServiceMonitors, want %d", got, b2i(v.serviceMonitor))
	}
	if got := len(m.PrometheusRules); got != b2i(v.rules) {
		t.Errorf("%d PrometheusRules, want %d", got, b2i(v.rules))
	}
	secrets := map[string]corev1.Secret{}
	for _, s := range m.Secrets {
		secrets[s.Name] = s
	}
	for _, pm := range m.PodMonitors {
		checkSelectedByPrometheus(t, "PodMonitor", pm.Labels, v.selectorLabels, v.monitorLabels)
		checkMonitorGroup(t, "PodMonitor", pm.APIVersion, v.monitorAPIVersion)
		checkLimits(t, map[string]*int64{"sampleLimit": pm.Spec.SampleLimit, "targetLimit": pm.Spec.TargetLimit, "labelLimit": pm.Spec.LabelLimit,
			"labelNameLengthLimit": pm.Spec.LabelNameLengthLimit, "labelValueLengthLimit": pm.Spec.LabelValueLengthLimit}, v.limits)
		checkSelects(t, "PodMonitor", pm.Spec.Selector.MatchLabels, pm.Spec.NamespaceSelector, podLabels)
		if len(pm.Spec.PodMetricsEndpoints) != 1 {
			t.Fatalf("PodMonitor has %d endpoints, want 1", len(pm.Spec.PodMetricsEndpoints))
		}
		ep := pm.Spec.PodMetricsEndpoints[0]
		if ep.Port == nil || *ep.Port != "metrics" {
			t.Error("PodMonitor must scrape the port named metrics")
		}
		examples.CheckTargetLabels(t, ep.RelabelConfigs, "podMonitor/"+namespace+"/"+pm.Name+"/0")
		checkEndpointAuth(t, v, ep.Scheme, ep.TLSConfig, ep.BasicAuth, secrets)
		if v.rbacProxy && (ep.Authorization == nil || ep.Authorization.Credentials == nil) {
			t.Error("behind kube-rbac-proxy the PodMonitor must send a token (prometheus.podMonitor.authorization)")
		}
	}
	for _, sm := range m.ServiceMonitors {
		checkSelectedByPrometheus(t, "ServiceMonitor", sm.Labels, v.selectorLabels, v.monitorLabels)
		checkMonitorGroup(t, "ServiceMonitor", sm.APIVersion, v.monitorAPIVersion)
		checkSelects(t, "ServiceMonitor", sm.Spec.Selector.MatchLabels, sm.Spec.NamespaceSelector, svc.Labels)
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" {
			t.Fatalf("ServiceMonitor: want one endpoint on the port named metrics, got %+v", sm.Spec.Endpoints)
		}
		ep := sm.Spec.Endpoints[0]
		examples.CheckTargetLabels(t, ep.RelabelConfigs, "serviceMonitor/"+namespace+"/"+sm.Name+"/0", "service", svc.Name)
		var tlsCfg *monitoringv1.SafeTLSConfig
		if ep.TLSConfig != nil {
			tlsCfg = &ep.TLSConfig.SafeTLSConfig
		}
		checkEndpointAuth(t, v, ep.Scheme, tlsCfg, ep.BasicAuth, secrets)
	}
	for _, pr := range m.PrometheusRules {
		checkSelectedByPrometheus(t, "PrometheusRule", pr.Labels, v.selectorLabels, nil)
		checkRules(t, pr)
	}
	var dashboards []corev1.ConfigMap
	for _, cm := range m.ConfigMaps {
		if _, ok := cm.Data["config.yaml"]; !ok {
			dashboards = append(dashboards, cm)
		}
	}
	examples.CheckDashboardConfigMaps(t, testenv.RepoRoot(), dashboards)
	if v.tls || v.basicAuth {
		checkWebConfigServes(t, v, pod, secrets)
	}
	checkOpenShift(t, v, m, pod)
	checkRBACProxyAccess(t, v, m, pod)
	if v.file == "" || v.pod.NoProcessReaders {
		// The rendered pod's mounts, arguments, user and capabilities are enough (root only).
		examples.CheckPodMountsSuffice(t, testenv.RepoRoot(), pod, v.pod)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkSelectedByPrometheus: monitors and rules carry the prometheusSelectorLabels asked for
// and nothing else of the kind: no release label by default, since a kube-prometheus-stack
// Prometheus selects release=<its own release name>, which the chart cannot know. A monitor's own
// labels join them.
func checkSelectedByPrometheus(t *testing.T, kind string, got, selector, extra map[string]string) {
	t.Helper()
	if _, ok := selector["release"]; !ok && got["release"] != "" {
		t.Errorf("%s carries release=%s, which nobody asked for (prometheusSelectorLabels)", kind, got["release"])
	}
	for _, want := range []map[string]string{selector, extra} {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s lacks the label %s=%s", kind, k, v)
			}
		}
	}
}

// checkMonitorGroup: the monitors' apiVersion follows prometheus.*.apiVersion (default the
// Prometheus Operator's).
func checkMonitorGroup(t *testing.T, kind, got, want string) {
	t.Helper()
	if want = cmp.Or(want, "monitoring.coreos.com/v1"); got != want {
		t.Errorf("%s apiVersion %q, want %q", kind, got, want)
	}
}

// checkLimits: the PodMonitor's scrape limits are those asked for, and none by default (a
// sampleLimit drops the node's whole scrape when one tenant multiplies its series).
func checkLimits(t *testing.T, limits map[string]*int64, want map[string]int64) {
	t.Helper()
	for name, got := range limits {
		w, ok := want[name]
		if ok != (got != nil) || (got != nil && *got != w) {
			t.Errorf("PodMonitor %s = %v, want %v (set: %v)", name, got, w, ok)
		}
	}
}

func checkSelects(t *testing.T, kind string, sel map[string]string, ns monitoringv1.NamespaceSelector, labels map[string]string) {
	t.Helper()
	if len(sel) == 0 {
		t.Errorf("%s selects everything", kind)
	}
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("%s selector %s=%s does not match the exporter's", kind, k, v)
		}
	}
	if ns.Any || !reflect.DeepEqual(ns.MatchNames, []string{namespace}) {
		t.Errorf("%s namespaceSelector %+v, want the release's namespace only", kind, ns)
	}
}

// checkEndpointAuth: the scheme follows web.tls, the CA comes from the TLS Secret the exporter
// mounts, and basic auth reads a Secret the chart renders.
func checkEndpointAuth(t *testing.T, v valueSet, scheme *monitoringv1.Scheme, tlsCfg *monitoringv1.SafeTLSConfig, ba *monitoringv1.BasicAuth, secrets map[string]corev1.Secret) {
	t.Helper()
	want := "http"
	if v.tls || v.rbacProxy {
		want = "https"
	}
	if scheme == nil || strings.ToLower(scheme.String()) != want {
		t.Errorf("scheme %v, want %s", scheme, want)
	}
	if (v.tls || v.rbacProxy) != (tlsCfg != nil) {
		t.Errorf("tlsConfig %+v with TLS %v", tlsCfg, v.tls)
	} else if v.rbacProxy && !v.tls && (tlsCfg.InsecureSkipVerify == nil || !*tlsCfg.InsecureSkipVerify) {
		// kube-rbac-proxy signs its own certificate at start: nothing to verify it against.
		t.Errorf("tlsConfig %+v: kube-rbac-proxy's own certificate is signed by nobody", tlsCfg)
	} else if v.tls && (tlsCfg.CA.Secret == nil || tlsCfg.CA.Secret.Name != "quota-exporter-tls" || tlsCfg.ServerName == nil || *tlsCfg.ServerName == "") {
		t.Errorf("tlsConfig must verify against the TLS Secret's CA under a server name: %+v", tlsCfg)
	}
	if v.basicAuth != (ba != nil) {
		t.Errorf("basicAuth %+v with basic auth %v", ba, v.basicAuth)
	} else if ba != nil {
		for _, ref := range []corev1.SecretKeySelector{ba.Username, ba.Password} {
			if s, ok := secrets[ref.Name]; !ok || s.StringData[ref.Key] == "" {
				t.Errorf("basicAuth reads %s/%s, which the chart does not render", ref.Name, ref.Key)
			}
		}
	}
}

// checkRules: the PrometheusRule's groups are exactly those of the rendered alerts/*.yaml.
func checkRules(t *testing.T, pr monitoringv1.PrometheusRule) {
	t.Helper()
	files, err := examples.RuleFiles(testenv.RepoRoot())
	if err != nil || len(files) == 0 {
		t.Fatalf("alerts/*.yaml: %v (run make mixin)", err)
	}
	var want []monitoringv1.RuleGroup
	for _, f := range files {
		g, err := examples.ReadRuleGroups(f)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, g...)
	}
	if !reflect.DeepEqual(pr.Spec.Groups, want) {
		t.Errorf("PrometheusRule groups differ from alerts/*.yaml (%d groups, want %d): run make chart", len(pr.Spec.Groups), len(want))
	}
}

// checkWebConfigServes runs the exporter with the rendered web-config.yml and scrapes it with the
// rendered scrape credentials (the chart hashed the password with bcrypt at render time).
func checkWebConfigServes(t *testing.T, v valueSet, pod corev1.PodSpec, secrets map[string]corev1.Secret) {
	t.Helper()
	var webConfig, tlsDir string
	for _, vol := range pod.Volumes {
		if vol.Secret != nil && secrets[vol.Secret.SecretName].StringData["web-config.yml"] != "" {
			webConfig = secrets[vol.Secret.SecretName].StringData["web-config.yml"]
		}
	}
	for _, vm := range pod.Containers[0].VolumeMounts {
		if vm.Name == "tls" {
			tlsDir = vm.MountPath
		}
	}
	if webConfig == "" {
		t.Fatal("no rendered Secret holds the web-config.yml the pod mounts")
	}
	w := examples.WebServe{Root: testenv.RepoRoot(), WebConfig: webConfig, TLSDir: tlsDir}
	if v.tls {
		w.ServerName = "quota-exporter.monitoring.svc"
	}
	if v.basicAuth {
		auth := secrets[fmt.Sprintf("%s-quota-exporter-scrape-auth", release)]
		w.User, w.Password = auth.StringData["username"], auth.StringData["password"]
	}
	examples.CheckWebConfigServes(t, w)
}

// TestChartTemplateWithoutKubeVersion: CI pipelines render offline, without --kube-version, where
// Helm checks the chart against its built-in default (v1.20 for a Helm built from source, the one
// pinned here; the Kubernetes of its client libraries for a released one). The output must not
// depend on it: the same objects as for a 1.37 cluster, recursive read-only mounts included.
func TestChartTemplateWithoutKubeVersion(t *testing.T) {
	out := helm(t, "template", release, chartDir(t), "--namespace", namespace)
	with := helm(t, "template", release, chartDir(t), "--namespace", namespace, "--kube-version", kubeVersion)
	if out != with {
		t.Error("helm template renders differently without --kube-version")
	}
	var m examples.Manifests
	for i, doc := range examples.SplitDocs([]byte(out)) {
		if err := m.Decode(doc); err != nil {
			t.Errorf("rendered document %d: %v", i, err)
		}
	}
	if len(m.DaemonSets) != 1 {
		t.Fatalf("%d DaemonSets rendered", len(m.DaemonSets))
	}
	for _, vm := range m.DaemonSets[0].Spec.Template.Spec.Containers[0].VolumeMounts {
		if vm.RecursiveReadOnly == nil || *vm.RecursiveReadOnly != corev1.RecursiveReadOnlyIfPossible {
			t.Errorf("mount %s lost recursiveReadOnly", vm.Name)
		}
	}
	t.Logf("lint without --kube-version: %s", strings.TrimSpace(helm(t, "lint", "--strict", chartDir(t))))
}

// TestChartLongReleaseName: Helm allows release names of 53 characters; every name the chart
// derives from one must still be valid (truncated to 63, Services as DNS labels).
func TestChartLongReleaseName(t *testing.T) {
	long := strings.Repeat("r", 40) + "-production-1"
	m, _ := renderRelease(t, long, "ci/web-values.yaml", "ci/servicemonitor-values.yaml")
	if m.DaemonSets == nil {
		t.Fatal("nothing rendered")
	}
	examples.CheckNames(t, m)
}

// TestChartFilesUpToDate: the chart embeds copies of the rendered mixin (make chart).
func TestChartFilesUpToDate(t *testing.T) {
	root := testenv.RepoRoot()
	for _, dir := range []struct{ src, glob string }{{"alerts", "*.yaml"}, {"dashboards", "*.json"}} {
		want, _ := filepath.Glob(filepath.Join(root, dir.src, dir.glob))
		got, _ := filepath.Glob(filepath.Join(chartDir(t), "files", dir.src, "*"))
		names := func(paths []string) []string {
			var n []string
			for _, p := range paths {
				n = append(n, filepath.Base(p))
			}
			return n
		}
		if !slices.Equal(names(got), names(want)) || len(want) == 0 {
			t.Errorf("charts/quota-exporter/files/%s holds %v, %s/ holds %v: run make chart", dir.src, names(got), dir.src, names(want))
			continue
		}
		for _, w := range want {
			a, _ := os.ReadFile(w)
			b, _ := os.ReadFile(filepath.Join(chartDir(t), "files", dir.src, filepath.Base(w)))
			if !bytes.Equal(a, b) {
				t.Errorf("charts/quota-exporter/files/%s/%s is stale: run make chart", dir.src, filepath.Base(w))
			}
		}
	}
}

// TestChartAppVersion: the chart installs the exporter version of this tree by default.
func TestChartAppVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if c := readChart(t); c.AppVersion != strings.TrimSpace(string(b)) {
		t.Errorf("Chart.yaml appVersion %q, VERSION %q", c.AppVersion, strings.TrimSpace(string(b)))
	}
}

// TestChartRefusesBrokenSettings: settings that cannot work fail the render with a reason.
func TestChartRefusesBrokenSettings(t *testing.T) {
	root := testenv.RepoRoot()
	for _, c := range []struct{ set, want string }{
		{"web.tls.enabled=true", "web.tls.secretName"},
		{"web.tls.enabled=true,web.tls.secretName=x", "web.tls.serverName"},
		{"web.basicAuth.enabled=true", "web.basicAuth.password"},
		{"web.basicAuth.enabled=true,web.basicAuth.existingSecret=x", "web.basicAuth.passwordHash"},
		{"prometheus.monitor.enabled=true,service.enabled=false", "service.enabled"},
		{"kubeRBACProxy.enabled=true,web.basicAuth.enabled=true,web.basicAuth.password=x", "web.basicAuth"},
		{"kubeRBACProxy.enabled=true,kubeRBACProxy.upstreamPort=10137", "upstreamPort"},
		// The NetworkPolicy admits namespaces by their immutable name only (issue 29).
		{"networkPolicy.namespaces=null", "networkPolicy.namespaces"},
		{"networkPolicy.prometheusNamespaceSelector.matchLabels.team=x", "prometheusNamespaceSelector"},
		{"networkPolicy.extraFrom[0].namespaceSelector.foo=null", "empty namespaceSelector"},
		{"networkPolicy.extraFrom[0].namespaceSelector.matchLabels.team=monitoring", "team"},
		{"networkPolicy.extraFrom[0].namespaceSelector.matchExpressions[0].key=kubernetes.io/metadata.name," +
			"networkPolicy.extraFrom[0].namespaceSelector.matchExpressions[0].operator=NotIn," +
			"networkPolicy.extraFrom[0].namespaceSelector.matchExpressions[0].values[0]=kube-system", "NotIn"},
		{"networkPolicy.extraFrom[0].podSelector.matchLabels.app\\.kubernetes\\.io/name=prometheus", "podSelector alone"},
		{"networkPolicy.extraFrom[0].ipBlock.cidr=0.0.0.0/0", "every address"},
	} {
		cmd := []string{"tool", "-modfile=" + filepath.Join(root, "tools", "helm", "go.mod"), "helm",
			"template", release, chartDir(t), "--kube-version", kubeVersion, "--set", c.set}
		out, err := examples.RunToolErr(t, root, 10*time.Minute, "go", cmd...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("--set %s: err %v, output %.300q; want a failure naming %s", c.set, err, out, c.want)
		}
	}
}
