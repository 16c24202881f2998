package examples

import (
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
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
}

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
// /-/healthy and /-/ready, a priority class, and the node affinity of CheckNodeAffinity.
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
	if pod.PriorityClassName == "" {
		t.Error("no priorityClassName: a node agent should be the last evicted under node pressure")
	}
	if !slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool {
		return t.Operator == corev1.TolerationOpExists && t.Key == "" && t.Effect == ""
	}) {
		t.Error("want a toleration {operator: Exists} so the exporter runs on every node")
	}
	CheckNodeAffinity(t, pod.Affinity)
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("want one container and no init container, got %d and %d", len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
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
	checkProbes(t, c, want)
}

// checkHostMounts: exactly the HostMounts, read-only, where the flags look; no host / ; other
// volumes only Secrets (the web config), read-only too.
func checkHostMounts(t testing.TB, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	hostOf := map[string]string{}
	for _, v := range pod.Volumes {
		switch {
		case v.HostPath != nil:
			if path.Clean(v.HostPath.Path) == "/" {
				t.Errorf("volume %s mounts the host's /", v.Name)
			}
			hostOf[v.Name] = path.Clean(v.HostPath.Path)
		case v.Secret != nil:
		default:
			t.Errorf("volume %s is neither a host directory the exporter reads nor a Secret", v.Name)
		}
	}
	got := map[string]string{} // host path -> mount path
	for _, vm := range c.VolumeMounts {
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

// checkProbes: readiness on /-/ready and liveness on /-/healthy of the metrics port, or TCP
// checks of that port when basic auth is on.
func checkProbes(t testing.TB, c corev1.Container, want PodWant) {
	t.Helper()
	for _, p := range []struct {
		name, path string
		probe      *corev1.Probe
	}{{"readiness", "/-/ready", c.ReadinessProbe}, {"liveness", "/-/healthy", c.LivenessProbe}} {
		switch {
		case p.probe == nil:
			t.Errorf("no %s probe", p.name)
		case want.TCPProbes:
			if p.probe.TCPSocket == nil || p.probe.TCPSocket.Port.String() != "metrics" {
				t.Errorf("%s probe: want a TCP check of the metrics port under basic auth, got %+v", p.name, p.probe.ProbeHandler)
			}
		default:
			g := p.probe.HTTPGet
			scheme := want.ProbeScheme
			if scheme == "" {
				scheme = corev1.URISchemeHTTP
			}
			if g == nil || g.Path != p.path || g.Port.String() != "metrics" || (g.Scheme != scheme && !(g.Scheme == "" && scheme == corev1.URISchemeHTTP)) {
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

// CheckNetworkPolicy: the policy selects the exporter's pods (podLabels) and admits, on the
// metrics port only, only pods labelled as Prometheus; no egress at all.
func CheckNetworkPolicy(t testing.TB, np networkingv1.NetworkPolicy, podLabels map[string]string, port string) {
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
	for i, r := range np.Spec.Ingress {
		if len(r.Ports) != 1 || r.Ports[0].Port == nil || r.Ports[0].Port.String() != port ||
			(r.Ports[0].Protocol != nil && *r.Ports[0].Protocol != corev1.ProtocolTCP) {
			t.Errorf("NetworkPolicy %s ingress %d: want the %s port (TCP) only, got %+v", np.Name, i, port, r.Ports)
		}
		if len(r.From) == 0 {
			t.Errorf("NetworkPolicy %s ingress %d admits every source", np.Name, i)
		}
		for j, f := range r.From {
			if f.IPBlock != nil || f.PodSelector == nil || len(f.PodSelector.MatchLabels)+len(f.PodSelector.MatchExpressions) == 0 {
				t.Errorf("NetworkPolicy %s ingress %d source %d: want a non-empty pod selector (the Prometheus pods), got %+v", np.Name, i, j, f)
			}
		}
	}
}

// PeakRSS3000 is the highest peak RSS docs/performance.md ("Real node") reports for the exporter
// at 3 000 cgroups (80.1 MiB; 67 MiB at the latest run): memory limits must stay clearly above
// it (MinMemoryLimit), or the node's largest exporters are OOM-killed on a busy scrape.
const (
	PeakRSS3000    = 81 << 20
	MinMemoryLimit = 2 * PeakRSS3000
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
		t.Errorf("memory limit %s: want at least %d MiB, twice the documented peak at 3 000 cgroups", mem.String(), MinMemoryLimit>>20)
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
