package examples

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recorder is a testing.TB that keeps what a check reports instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()           {}
func (r *recorder) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }

// reports runs check with a recorder in its own goroutine (Fatal ends it) and returns what it reported.
func reports(t testing.TB, check func(testing.TB)) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); check(r) }()
	<-done
	return r.errs
}

// TestChecksCatchViolations guards the guards: each way of granting more than the exporter needs
// is reported by CheckExporterPod or CheckNetworkPolicy, and the shipped DaemonSet is not.
func TestChecksCatchViolations(t *testing.T) {
	_, m := loadManifests(t)
	if len(m.DaemonSets) != 1 || len(m.NetworkPolicies) != 1 {
		t.Fatal("want the base DaemonSet and NetworkPolicy")
	}
	base := m.DaemonSets[0]
	if errs := reports(t, func(tb testing.TB) { CheckExporterPod(tb, base.Spec.Template.Spec, PodWant{}) }); len(errs) != 0 {
		t.Fatalf("the shipped DaemonSet fails the check: %v", errs)
	}
	podLabels := base.Spec.Template.Labels
	if errs := reports(t, func(tb testing.TB) {
		CheckNetworkPolicy(tb, m.NetworkPolicies[0], podLabels, "metrics", []string{"monitoring"})
	}); len(errs) != 0 {
		t.Fatalf("the shipped NetworkPolicy fails the check: %v", errs)
	}
	c0 := func(ds *appsv1.DaemonSet) *corev1.Container { return &ds.Spec.Template.Spec.Containers[0] }
	for name, mutate := range map[string]func(*appsv1.DaemonSet){
		"host root mounted": func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Volumes = append(ds.Spec.Template.Spec.Volumes, corev1.Volume{Name: "root",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			c0(ds).VolumeMounts = append(c0(ds).VolumeMounts, corev1.VolumeMount{Name: "root", MountPath: "/host/root", ReadOnly: true})
		},
		"writable mount": func(ds *appsv1.DaemonSet) { c0(ds).VolumeMounts[1].ReadOnly = false },
		"rootfs flag":    func(ds *appsv1.DaemonSet) { c0(ds).Args = append(c0(ds).Args, "--path.rootfs=/host/root") },
		"SYS_ADMIN": func(ds *appsv1.DaemonSet) {
			c0(ds).SecurityContext.Capabilities.Add = append(c0(ds).SecurityContext.Capabilities.Add, "SYS_ADMIN")
		},
		"BPF without gopause": func(ds *appsv1.DaemonSet) {
			c0(ds).SecurityContext.Capabilities.Add = append(c0(ds).SecurityContext.Capabilities.Add, "BPF", "PERFMON")
		},
		"privileged":       func(ds *appsv1.DaemonSet) { p := true; c0(ds).SecurityContext.Privileged = &p },
		"writable root fs": func(ds *appsv1.DaemonSet) { f := false; c0(ds).SecurityContext.ReadOnlyRootFilesystem = &f },
		"host network":     func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true },
		"liveness on /":    func(ds *appsv1.DaemonSet) { c0(ds).LivenessProbe.HTTPGet.Path = "/" },
		"system-node-critical by default": func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.PriorityClassName = "system-node-critical"
		},
		"virtual nodes allowed": func(ds *appsv1.DaemonSet) {
			term := &ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
			term.MatchExpressions = slices.DeleteFunc(term.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool { return e.Key == "type" })
		},
		"podlogs mount elsewhere": func(ds *appsv1.DaemonSet) {
			for i, a := range c0(ds).Args {
				if a == "--path.podlogs=/host/var/log" {
					c0(ds).Args[i] = "--path.podlogs=/host/logs"
				}
			}
		},
	} {
		ds := base.DeepCopy()
		mutate(ds)
		if errs := reports(t, func(tb testing.TB) { CheckExporterPod(tb, ds.Spec.Template.Spec, PodWant{}) }); len(errs) == 0 {
			t.Errorf("%s: CheckExporterPod reports nothing", name)
		}
	}
	for name, mutate := range map[string]func(*networkingv1.NetworkPolicy){
		"egress allowed": func(np *networkingv1.NetworkPolicy) { np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}} },
		"any source":     func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].From = nil },
		"any port":       func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].Ports = nil },
		"other pods": func(np *networkingv1.NetworkPolicy) {
			np.Spec.PodSelector.MatchLabels = map[string]string{"app": "other"}
		},
		"ingress only typed": func(np *networkingv1.NetworkPolicy) { np.Spec.PolicyTypes = []networkingv1.PolicyType{"Ingress"} },
		// Issue 29: any namespace, and a pod label any tenant can set on its own pod.
		"every namespace, a tenant-settable pod label": func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
			}}
		},
		"empty namespace selector": func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{}
		},
		"namespace by a label its owner sets": func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "monitoring"}}
		},
		"namespace name NotIn": func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}}}}
		},
		"pod selector alone": func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}}}}
		},
		"every address": func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From = append(np.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}})
		},
		"another namespace": func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From = append(np.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: "tenant-a"}}})
		},
	} {
		np := m.NetworkPolicies[0].DeepCopy()
		mutate(np)
		if errs := reports(t, func(tb testing.TB) { CheckNetworkPolicy(tb, *np, podLabels, "metrics", []string{"monitoring"}) }); len(errs) == 0 {
			t.Errorf("%s: CheckNetworkPolicy reports nothing", name)
		}
	}
}
