package examples

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The security properties of the exporter's pod, shared by the kustomize examples' tests and
// the Helm chart's (test/chart): whatever installs the exporter, the pod gets no more than this.
// docs/security.md names these checks for each privilege.

// HostMounts are the host directories the exporter reads, each with the flag whose value it
// is mounted under (path.Join(flag value, suffix)). Nothing else of the host is mounted:
// --path.rootfs reads nothing, so the host's / is not among them.
var HostMounts = []struct{ Host, Flag, Suffix string }{
	{"/proc", "--path.procfs", ""},
	{"/sys/fs/cgroup", "--path.sysfs", "fs/cgroup"},
	{"/sys/devices/system/cpu", "--path.sysfs", "devices/system/cpu"},
	{"/var/log/pods", "--path.podlogs", "pods"},
	{"/var/log/containers", "--path.podlogs", "containers"},
}

// PodWant is what differs between the variants of the exporter pod.
type PodWant struct {
	// BPF: a BPF collector (gopause, cfsstall) is on, so CAP_BPF and CAP_PERFMON are added;
	// without one they must not be.
	BPF bool
	// ProbeScheme is the kubelet probes' scheme (HTTPS with a TLS web config).
	ProbeScheme corev1.URIScheme
	// TCPProbes: basic auth is on, so the probes are TCP checks (the kubelet cannot authenticate).
	TCPProbes bool
	// NoProcessReaders: every collector that reads other processes' /proc files is off, so the
	// pod runs as non-root, without hostPID, SYS_PTRACE or DAC_READ_SEARCH.
	NoProcessReaders bool
	// PriorityClass is the pod's priority class: none unless asked for (GKE refuses
	// system-node-critical outside kube-system).
	PriorityClass string
	// RBACProxy: kube-rbac-proxy serves the metrics port and the exporter listens on loopback.
	RBACProxy bool
}

// RBACProxyContainer is the name of the kube-rbac-proxy sidecar (the chart's kubeRBACProxy).
const RBACProxyContainer = "kube-rbac-proxy"

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// CheckExporterPod asserts the exporter pod's least privilege: hostPID without host network or
// IPC, no API token, root with exactly SYS_PTRACE and DAC_READ_SEARCH (plus BPF and PERFMON only
// with a BPF collector), all else dropped, no privilege escalation, a read-only root filesystem,
// only the host directories of HostMounts, each read-only under the flag that reads it, probes on
// /-/healthy and /-/ready, the priority class asked for (none by default), and the node affinity
// of CheckNodeAffinity. With want.RBACProxy, the sidecar of CheckRBACProxy.
func CheckExporterPod(t testing.TB, pod corev1.PodSpec, want PodWant) {
	t.Helper()
	if pod.HostPID == want.NoProcessReaders {
		t.Errorf("hostPID %v: wanted only when a collector reads the node's processes", pod.HostPID)
	}
	if pod.HostNetwork || pod.HostIPC {
		t.Error("hostNetwork/hostIPC are not needed")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the exporter does not use the API: automountServiceAccountToken must be false")
	}
	if pod.PriorityClassName != want.PriorityClass {
		t.Errorf("priorityClassName %q, want %q (none by default: GKE refuses system-node-critical outside kube-system)", pod.PriorityClassName, want.PriorityClass)
	}
	if !slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool {
		return t.Operator == corev1.TolerationOpExists && t.Key == "" && t.Effect == ""
	}) {
		t.Error("want a toleration {operator: Exists} so the exporter runs on every node")
	}
	CheckNodeAffinity(t, pod.Affinity)
	wantContainers := 1
	if want.RBACProxy {
		wantContainers = 2
	}
	if len(pod.Containers) != wantContainers || len(pod.InitContainers) != 0 {
		t.Fatalf("want %d containers and no init container, got %d and %d", wantContainers, len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	if want.RBACProxy {
		CheckRBACProxy(t, pod)
	}
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container securityContext missing")
	}
	if want.NoProcessReaders {
		if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
			(sc.RunAsUser != nil && *sc.RunAsUser == 0) {
			t.Error("without a process reader the pod must run as non-root")
		}
	} else if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Error("runAsUser must be 0 (reading other users' /proc/<pid>/environ, mem)")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("must not be privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem must be true")
	}
	var wantCaps []corev1.Capability
	if want.BPF {
		wantCaps = append(wantCaps, "BPF", "PERFMON")
	}
	if !want.NoProcessReaders {
		wantCaps = append(wantCaps, "DAC_READ_SEARCH", "SYS_PTRACE")
	}
	slices.Sort(wantCaps)
	if sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Error("capabilities must drop ALL")
	} else {
		add := slices.Clone(sc.Capabilities.Add)
		slices.Sort(add)
		if (len(add) != 0 || len(wantCaps) != 0) && !reflect.DeepEqual(add, wantCaps) {
			t.Errorf("capabilities add %v, want exactly %v", sc.Capabilities.Add, wantCaps)
		}
	}
	bpfFlags := slices.ContainsFunc(c.Args, func(a string) bool {
		return a == "--collector.gopause" || a == "--collector.cfsstall"
	})
	if bpfFlags != want.BPF {
		t.Errorf("BPF collector flags present = %v, want %v (capabilities follow the collectors)", bpfFlags, want.BPF)
	}
	if _, ok := flagValue(c.Args, "--path.rootfs"); ok {
		t.Error("--path.rootfs reads nothing: neither the flag nor a host / mount belongs in the pod")
	}
	checkHostMounts(t, pod, c)
	probePort := "metrics"
	if want.RBACProxy {
		// Through the proxy, by number: a port name resolves among the probed container's own ports.
		want.ProbeScheme = corev1.URISchemeHTTPS
		if ports := pod.Containers[1].Ports; len(ports) == 1 {
			probePort = fmt.Sprint(ports[0].ContainerPort)
		}
	}
	checkProbes(t, c, want, probePort)
}

// CheckRBACProxy: the second container is kube-rbac-proxy, unprivileged (non-root, every
// capability dropped, no escalation, read-only root), serving the metrics port with
// --secure-listen-address and proxying to the loopback address the exporter alone listens on,
// which exposes no port of its own; only the two probe paths pass unauthenticated; the API token
// is mounted into the proxy alone.
func CheckRBACProxy(t testing.TB, pod corev1.PodSpec) {
	t.Helper()
	exp, proxy := pod.Containers[0], pod.Containers[1]
	if proxy.Name != RBACProxyContainer {
		t.Fatalf("second container %q, want %s", proxy.Name, RBACProxyContainer)
	}
	listen, _ := flagValue(exp.Args, "--web.listen-address")
	if !strings.HasPrefix(listen, "127.0.0.1:") {
		t.Errorf("exporter --web.listen-address=%s: behind kube-rbac-proxy it must listen on loopback only", listen)
	}
	if len(exp.Ports) != 0 {
		t.Errorf("exporter declares ports %+v: the proxy serves the metrics port", exp.Ports)
	}
	if up, _ := flagValue(proxy.Args, "--upstream"); up != "http://"+listen+"/" {
		t.Errorf("proxy --upstream=%s, want http://%s/", up, listen)
	}
	secure, _ := flagValue(proxy.Args, "--secure-listen-address")
	if len(proxy.Ports) != 1 || proxy.Ports[0].Name != "metrics" || fmt.Sprintf(":%d", proxy.Ports[0].ContainerPort) != secure {
		t.Errorf("proxy ports %+v and --secure-listen-address=%s: want the metrics port, served over TLS", proxy.Ports, secure)
	}
	if ignore, _ := flagValue(proxy.Args, "--ignore-paths"); ignore != "/-/ready,/-/healthy" {
		t.Errorf("proxy --ignore-paths=%q: only the probe paths may skip authentication", ignore)
	}
	if _, ok := flagValue(proxy.Args, "--config-file"); !ok {
		t.Error("proxy has no --config-file: without its resourceAttributes any authenticated token may read")
	}
	sc := proxy.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		(sc.Privileged != nil && *sc.Privileged) {
		t.Errorf("proxy securityContext %+v: want non-root, no capability, no escalation, read-only root", sc)
	}
	tokenVolumes := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(p corev1.VolumeProjection) bool { return p.ServiceAccountToken != nil }) {
			tokenVolumes[v.Name] = true
		}
	}
	if len(tokenVolumes) != 1 {
		t.Errorf("%d projected token volumes, want 1 for the proxy", len(tokenVolumes))
	}
	if !slices.ContainsFunc(proxy.VolumeMounts, func(m corev1.VolumeMount) bool {
		return tokenVolumes[m.Name] && m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount"
	}) {
		t.Error("the proxy lacks its API token at the in-cluster path")
	}
}

// checkHostMounts: exactly the HostMounts, read-only, where the flags look; no host / ; other
// volumes of the exporter only Secrets (the web config), read-only too. Volumes of other kinds
// (kube-rbac-proxy's config and token) must not reach the exporter's container.
func checkHostMounts(t testing.TB, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	hostOf := map[string]string{}
	notForExporter := map[string]bool{}
	for _, v := range pod.Volumes {
		switch {
		case v.HostPath != nil:
			if path.Clean(v.HostPath.Path) == "/" {
				t.Errorf("volume %s mounts the host's /", v.Name)
			}
			hostOf[v.Name] = path.Clean(v.HostPath.Path)
		case v.Secret != nil:
		case v.ConfigMap != nil || v.Projected != nil:
			notForExporter[v.Name] = true
		default:
			t.Errorf("volume %s is neither a host directory the exporter reads nor a Secret", v.Name)
		}
	}
	got := map[string]string{} // host path -> mount path
	for _, vm := range c.VolumeMounts {
		if notForExporter[vm.Name] {
			t.Errorf("the exporter mounts %s, a volume for kube-rbac-proxy (its API token or config)", vm.Name)
		}
		if !vm.ReadOnly {
			t.Errorf("mount %s -> %s must be readOnly", vm.Name, vm.MountPath)
		}
		if host, ok := hostOf[vm.Name]; ok {
			got[host] = vm.MountPath
			if vm.MountPropagation != nil && *vm.MountPropagation == corev1.MountPropagationBidirectional {
				t.Errorf("mount %s: Bidirectional propagation lets the container mount onto the host", vm.Name)
			}
		}
	}
	want := map[string]string{}
	for _, m := range HostMounts {
		v, ok := flagValue(c.Args, m.Flag)
		if !ok {
			t.Errorf("args lack %s (the host %s is mounted for it)", m.Flag, m.Host)
			continue
		}
		want[m.Host] = path.Join(v, m.Suffix)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("host mounts (host -> container) %v, want %v", got, want)
	}
}

// checkProbes: readiness on /-/ready and liveness on /-/healthy of the metrics port (port: its
// name, or its number when another container serves it), or TCP checks of that port when basic
// auth is on. The probes are the exporter's own: a liveness failure restarts the exporter.
func checkProbes(t testing.TB, c corev1.Container, want PodWant, port string) {
	t.Helper()
	for _, p := range []struct {
		name, path string
		probe      *corev1.Probe
	}{{"readiness", "/-/ready", c.ReadinessProbe}, {"liveness", "/-/healthy", c.LivenessProbe}} {
		switch {
		case p.probe == nil:
			t.Errorf("no %s probe", p.name)
		case want.TCPProbes:
			if p.probe.TCPSocket == nil || p.probe.TCPSocket.Port.String() != port {
				t.Errorf("%s probe: want a TCP check of the metrics port under basic auth, got %+v", p.name, p.probe.ProbeHandler)
			}
		default:
			g := p.probe.HTTPGet
			scheme := want.ProbeScheme
			if scheme == "" {
				scheme = corev1.URISchemeHTTP
			}
			if g == nil || g.Path != p.path || g.Port.String() != port || (g.Scheme != scheme && !(g.Scheme == "" && scheme == corev1.URISchemeHTTP)) {
				t.Errorf("%s probe: want an %s GET of %s on the metrics port, got %+v", p.name, scheme, p.path, p.probe.ProbeHandler)
			}
		}
	}
}

// CheckNodeAffinity: a required node affinity whose every term keeps Linux nodes of the image's
// architectures (amd64, arm64) and excludes virtual nodes (virtual-kubelet's type label, EKS
// Fargate's compute type), which have no kernel of their own to read.
func CheckNodeAffinity(t testing.TB, a *corev1.Affinity) {
	t.Helper()
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		t.Error("no required node affinity: virtual nodes (virtual-kubelet, Fargate) would be tolerated")
		return
	}
	for i, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		has := func(key string, op corev1.NodeSelectorOperator, values ...string) bool {
			return slices.ContainsFunc(term.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
				v := slices.Clone(e.Values)
				slices.Sort(v)
				return e.Key == key && e.Operator == op && reflect.DeepEqual(v, values)
			})
		}
		for _, r := range []struct {
			key    string
			op     corev1.NodeSelectorOperator
			values []string
		}{
			{"kubernetes.io/os", corev1.NodeSelectorOpIn, []string{"linux"}},
			{"kubernetes.io/arch", corev1.NodeSelectorOpIn, []string{"amd64", "arm64"}},
			{"type", corev1.NodeSelectorOpNotIn, []string{"virtual-kubelet"}},
			{"eks.amazonaws.com/compute-type", corev1.NodeSelectorOpNotIn, []string{"fargate"}},
		} {
			if !has(r.key, r.op, r.values...) {
				t.Errorf("node selector term %d lacks %s %s %v", i, r.key, r.op, r.values)
			}
		}
	}
}

// NamespaceNameLabel is the label the API server sets on every namespace to its name; nobody can
// change it, unlike any other namespace label, which the namespace's owner may set.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// CheckNetworkPolicy: the policy selects the exporter's pods (podLabels) and admits, on the
// metrics port only, only the pods of the namespaces named in wantNamespaces, selected by
// NamespaceNameLabel; no egress at all. Every source must name its namespaces that way (an empty
// namespace selector admits every namespace; any other label, or a pod selector alone, admits
// what a tenant can label) or be an ipBlock short of the whole address space.
func CheckNetworkPolicy(t testing.TB, np networkingv1.NetworkPolicy, podLabels map[string]string, port string, wantNamespaces []string) {
	t.Helper()
	if len(np.Spec.PodSelector.MatchExpressions) != 0 || len(np.Spec.PodSelector.MatchLabels) == 0 {
		t.Errorf("NetworkPolicy %s: want a matchLabels pod selector, got %+v", np.Name, np.Spec.PodSelector)
	}
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if podLabels[k] != v {
			t.Errorf("NetworkPolicy %s selects %s=%s, which the exporter pods do not carry", np.Name, k, v)
		}
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("NetworkPolicy %s policyTypes %v, want Ingress and Egress", np.Name, np.Spec.PolicyTypes)
	}
	if len(np.Spec.Egress) != 0 {
		t.Errorf("NetworkPolicy %s allows egress %+v; the exporter connects nowhere", np.Name, np.Spec.Egress)
	}
	if len(np.Spec.Ingress) == 0 {
		t.Errorf("NetworkPolicy %s admits nothing: Prometheus could not scrape", np.Name)
	}
	var admitted []string
	for i, r := range np.Spec.Ingress {
		if len(r.Ports) != 1 || r.Ports[0].Port == nil || r.Ports[0].Port.String() != port ||
			(r.Ports[0].Protocol != nil && *r.Ports[0].Protocol != corev1.ProtocolTCP) {
			t.Errorf("NetworkPolicy %s ingress %d: want the %s port (TCP) only, got %+v", np.Name, i, port, r.Ports)
		}
		if len(r.From) == 0 {
			t.Errorf("NetworkPolicy %s ingress %d admits every source", np.Name, i)
		}
		for j, f := range r.From {
			names, err := peerNamespaces(f)
			if err != nil {
				t.Errorf("NetworkPolicy %s ingress %d source %d: %v", np.Name, i, j, err)
			}
			admitted = append(admitted, names...)
		}
	}
	slices.Sort(admitted)
	want := slices.Sorted(slices.Values(wantNamespaces))
	if !slices.Equal(slices.Compact(admitted), want) {
		t.Errorf("NetworkPolicy %s admits the namespaces %v, want %v", np.Name, admitted, want)
	}
}

// peerNamespaces returns the namespaces a NetworkPolicy source admits, or why it admits more than
// named namespaces: a namespace selector must be non-empty and use NamespaceNameLabel alone
// (matchLabels, or In); an ipBlock must not be the whole address space.
func peerNamespaces(f networkingv1.NetworkPolicyPeer) ([]string, error) {
	if f.IPBlock != nil {
		if f.NamespaceSelector != nil || f.PodSelector != nil {
			return nil, fmt.Errorf("an ipBlock with selectors is invalid")
		}
		if c := f.IPBlock.CIDR; c == "0.0.0.0/0" || c == "::/0" {
			return nil, fmt.Errorf("ipBlock %s admits every address", c)
		}
		return nil, nil
	}
	sel := f.NamespaceSelector
	if sel == nil {
		return nil, fmt.Errorf("no namespaceSelector: a pod selector alone admits pods by labels anyone who creates pods in the exporter's namespace sets")
	}
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		return nil, fmt.Errorf("an empty namespaceSelector admits every namespace")
	}
	// Requirements are ANDed: the admitted namespaces are the intersection of each one's names.
	var names []string
	constrain := func(values []string) {
		if names == nil {
			names = slices.Clone(values)
			return
		}
		names = slices.DeleteFunc(names, func(n string) bool { return !slices.Contains(values, n) })
	}
	for k, v := range sel.MatchLabels {
		if k != NamespaceNameLabel {
			return nil, fmt.Errorf("namespaceSelector on %s, a label the namespace's owner may set: select %s", k, NamespaceNameLabel)
		}
		constrain([]string{v})
	}
	for _, e := range sel.MatchExpressions {
		if e.Key != NamespaceNameLabel || e.Operator != metav1.LabelSelectorOpIn || len(e.Values) == 0 {
			return nil, fmt.Errorf("namespaceSelector expression %s %s %v: only %s In [names] names namespaces", e.Key, e.Operator, e.Values, NamespaceNameLabel)
		}
		constrain(e.Values)
	}
	return names, nil
}

// PeakRSS3000 is the peak RSS docs/performance.md ("Real node") reports for the exporter at
// 3 000 cgroups (67.0 MiB), and HostilePeak the memory cgroup's peak the hostile-node test
// allows with every tenant class at once (test/hostile PeakBound; measured 101–124 MiB).
// Memory limits must stay clearly above both (MinMemoryLimit), or the node's largest
// exporters are OOM-killed on a busy scrape, or by a tenant.
const (
	PeakRSS3000    = 67 << 20
	HostilePeak    = 160 << 20
	MinMemoryLimit = max(2*PeakRSS3000, HostilePeak)
)

// CheckResources: CPU and memory requests, a CPU limit of its own at or above the request, and a
// memory limit of at least MinMemoryLimit.
func CheckResources(t testing.TB, r corev1.ResourceRequirements) {
	t.Helper()
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := r.Requests[n]; !ok || q.IsZero() {
			t.Errorf("no %s request", n)
		}
	}
	cpu, ok := r.Limits[corev1.ResourceCPU]
	if !ok || cpu.Cmp(r.Requests[corev1.ResourceCPU]) < 0 {
		t.Errorf("want a CPU limit >= the request, got %v", cpu.String())
	}
	mem, ok := r.Limits[corev1.ResourceMemory]
	if !ok || mem.Value() < MinMemoryLimit {
		t.Errorf("memory limit %s: want at least %d MiB, twice the documented peak at 3 000 cgroups and the hostile-node bound", mem.String(), MinMemoryLimit>>20)
	}
}

// CheckDashboardConfigMaps: one ConfigMap per rendered dashboards/*.json under root, labelled
// grafana_dashboard: "1" for the Grafana sidecar, holding the dashboard as rendered (but for a
// final newline), each well below the 256 KiB of kubectl apply's last-applied annotation.
func CheckDashboardConfigMaps(t testing.TB, root string, cms []corev1.ConfigMap) {
	t.Helper()
	dashboards, _ := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	got := map[string]string{}
	for _, cm := range cms {
		if cm.Labels["grafana_dashboard"] != "1" {
			t.Errorf("ConfigMap %s lacks the label grafana_dashboard: \"1\" the Grafana sidecar looks for", cm.Name)
		}
		size := 0
		for k, v := range cm.Data {
			got[k] = v
			size += len(k) + len(v)
		}
		if size > 200<<10 {
			t.Errorf("ConfigMap %s holds %d bytes; kubectl apply's annotation limit is 256 KiB", cm.Name, size)
		}
	}
	if len(got) != len(dashboards) || len(dashboards) == 0 {
		t.Errorf("%d dashboards in ConfigMaps, %d rendered in dashboards/: regenerate (make examples, make chart)", len(got), len(dashboards))
	}
	for _, d := range dashboards {
		want, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		if g, ok := got[filepath.Base(d)]; !ok || strings.TrimRight(g, "\n") != strings.TrimRight(string(want), "\n") {
			t.Errorf("dashboard %s is missing or stale in the ConfigMaps: regenerate (make examples, make chart)", filepath.Base(d))
		}
	}
}
