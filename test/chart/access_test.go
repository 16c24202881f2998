package chart

import (
	"slices"
	"testing"

	securityv1 "github.com/openshift/api/security/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/quota-exporter/quota_exporter/test/examples"
)

// Who may do what: RBAC rules are compared with Kubernetes' own rule coverage
// (component-helpers' Covers, what the API server's escalation check uses); the OpenShift SCC
// field by field against the pod it must admit (no OpenShift admission runs here).

// grants reports whether the rules bound to subject (through the bindings) cover want.
func grants(m examples.Manifests, subject rbacv1.Subject, namespace string, want rbacv1.PolicyRule) bool {
	var rules []rbacv1.PolicyRule
	has := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == subject.Kind && s.Name == subject.Name && s.Namespace == subject.Namespace
		})
	}
	for _, b := range m.ClusterRoleBindings {
		if !has(b.Subjects) || b.RoleRef.Kind != "ClusterRole" {
			continue
		}
		for _, r := range m.ClusterRoles {
			if r.Name == b.RoleRef.Name {
				rules = append(rules, r.Rules...)
			}
		}
	}
	for _, b := range m.RoleBindings {
		if !has(b.Subjects) || b.Namespace != namespace || b.RoleRef.Kind != "Role" {
			continue
		}
		for _, r := range m.Roles {
			if r.Name == b.RoleRef.Name && r.Namespace == namespace {
				rules = append(rules, r.Rules...)
			}
		}
	}
	ok, _ := rbacvalidation.Covers(rules, []rbacv1.PolicyRule{want})
	return ok
}

func podSubject(pod corev1.PodSpec) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: pod.ServiceAccountName, Namespace: namespace}
}

// rbacProxyConfig is the part of kube-rbac-proxy's --config-file the chart writes.
type rbacProxyConfig struct {
	Authorization struct {
		ResourceAttributes struct {
			Namespace, APIVersion, Resource, Subresource, Name string
		} `json:"resourceAttributes"`
	} `json:"authorization"`
}

// checkRBACProxyAccess: with kube-rbac-proxy, the pod's service account may create TokenReviews
// and SubjectAccessReviews, the proxy's config asks for a `get` on the Service's subresource in
// the release's namespace, and the readers of the value set are granted exactly that; without
// it, the chart grants nothing.
func checkRBACProxyAccess(t *testing.T, v valueSet, m examples.Manifests, pod corev1.PodSpec) {
	t.Helper()
	sa := podSubject(pod)
	review := []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
	if !v.rbacProxy {
		if len(m.ClusterRoles)+len(m.ClusterRoleBindings) != 0 {
			t.Errorf("%d ClusterRoles and %d bindings without kube-rbac-proxy: the exporter calls no API", len(m.ClusterRoles), len(m.ClusterRoleBindings))
		}
		for _, r := range review {
			if grants(m, sa, namespace, r) {
				t.Errorf("the exporter's service account may %v %v without kube-rbac-proxy", r.Verbs, r.Resources)
			}
		}
		return
	}
	for _, r := range review {
		if !grants(m, sa, namespace, r) {
			t.Errorf("kube-rbac-proxy's service account may not %v %v", r.Verbs, r.Resources)
		}
	}
	// The config the proxy mounts.
	var cmName string
	for _, vol := range pod.Volumes {
		if vol.ConfigMap != nil && slices.ContainsFunc(pod.Containers[1].VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == vol.Name }) {
			cmName = vol.ConfigMap.Name
		}
	}
	var cfg rbacProxyConfig
	found := false
	for _, cm := range m.ConfigMaps {
		if cm.Name == cmName {
			found = true
			if err := sigsyaml.UnmarshalStrict([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
				t.Fatalf("kube-rbac-proxy config.yaml: %v", err)
			}
		}
	}
	if !found {
		t.Fatalf("the ConfigMap %q kube-rbac-proxy mounts is not rendered", cmName)
	}
	ra := cfg.Authorization.ResourceAttributes
	if ra.Namespace != namespace || ra.Resource != "services" || ra.Subresource == "" || ra.Name == "" {
		t.Errorf("kube-rbac-proxy's resourceAttributes %+v: want a get on a services subresource in %s", ra, namespace)
	}
	read := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{ra.Resource + "/" + ra.Subresource},
		ResourceNames: []string{ra.Name}, Verbs: []string{"get"}}
	reader := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "prometheus-k8s", Namespace: "monitoring"}
	if !grants(m, reader, ra.Namespace, read) {
		t.Errorf("kubeRBACProxy.readers' %s/%s may not %v %v: kube-rbac-proxy would refuse its scrapes", reader.Namespace, reader.Name, read.Verbs, read.Resources)
	}
	if grants(m, sa, ra.Namespace, read) {
		t.Error("the exporter's own service account may read the metrics: only the readers should")
	}
}

// checkOpenShift: with openshift.enabled, one SCC that admits the rendered pod (every host
// namespace, volume type, user, capability, SELinux type and seccomp profile it asks for) and
// nothing more (no privileged container, host network, IPC or ports), and a Role that lets the
// pod's service account use it; without it, none.
func checkOpenShift(t *testing.T, v valueSet, m examples.Manifests, pod corev1.PodSpec) {
	t.Helper()
	if !v.openshift {
		if len(m.SecurityConstraints) != 0 {
			t.Errorf("%d SCCs without openshift.enabled", len(m.SecurityConstraints))
		}
		return
	}
	if len(m.SecurityConstraints) != 1 {
		t.Fatalf("%d SCCs, want 1", len(m.SecurityConstraints))
	}
	scc := m.SecurityConstraints[0]
	use := rbacv1.PolicyRule{APIGroups: []string{"security.openshift.io"}, Resources: []string{"securitycontextconstraints"},
		ResourceNames: []string{scc.Name}, Verbs: []string{"use"}}
	if !grants(m, podSubject(pod), namespace, use) {
		t.Errorf("the pod's service account may not use the SCC %s", scc.Name)
	}
	if scc.AllowPrivilegedContainer || scc.AllowHostNetwork || scc.AllowHostIPC || scc.AllowHostPorts ||
		(scc.AllowPrivilegeEscalation != nil && *scc.AllowPrivilegeEscalation) {
		t.Errorf("SCC allows more than the pod needs: %+v", scc)
	}
	if scc.AllowHostPID != pod.HostPID {
		t.Errorf("SCC allowHostPID %v, pod hostPID %v", scc.AllowHostPID, pod.HostPID)
	}
	types := map[securityv1.FSType]bool{}
	for _, vol := range pod.Volumes {
		switch {
		case vol.HostPath != nil:
			types[securityv1.FSTypeHostPath] = true
			if !scc.AllowHostDirVolumePlugin {
				t.Error("SCC refuses the host directories the exporter reads")
			}
		case vol.Secret != nil:
			types[securityv1.FSTypeSecret] = true
		case vol.ConfigMap != nil:
			types[securityv1.FSTypeConfigMap] = true
		case vol.Projected != nil:
			types[securityv1.FSProjected] = true
		}
	}
	for ty := range types {
		if !slices.Contains(scc.Volumes, ty) && !slices.Contains(scc.Volumes, securityv1.FSTypeAll) {
			t.Errorf("SCC volumes %v lack %s, which the pod uses", scc.Volumes, ty)
		}
	}
	for _, c := range pod.Containers {
		if c.SecurityContext == nil {
			continue
		}
		if c.SecurityContext.Capabilities != nil {
			for _, capability := range c.SecurityContext.Capabilities.Add {
				if !slices.Contains(scc.AllowedCapabilities, capability) {
					t.Errorf("SCC allowedCapabilities %v lack %s, which container %s adds", scc.AllowedCapabilities, capability, c.Name)
				}
			}
		}
		if scc.ReadOnlyRootFilesystem && (c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem) {
			t.Errorf("SCC requires a read-only root, container %s has none", c.Name)
		}
	}
	if len(scc.AllowedCapabilities) > 4 || slices.Contains(scc.AllowedCapabilities, "SYS_ADMIN") || slices.Contains(scc.AllowedCapabilities, "*") {
		t.Errorf("SCC allowedCapabilities %v: more than the collectors need", scc.AllowedCapabilities)
	}
	if scc.RunAsUser.Type != securityv1.RunAsUserStrategyRunAsAny && pod.SecurityContext.RunAsUser != nil && *pod.SecurityContext.RunAsUser == 0 {
		t.Errorf("SCC runAsUser %s refuses uid 0, which the process readers need", scc.RunAsUser.Type)
	}
	sel := pod.SecurityContext.SELinuxOptions
	if sel == nil || sel.Type != "spc_t" || scc.SELinuxContext.Type != securityv1.SELinuxStrategyMustRunAs ||
		scc.SELinuxContext.SELinuxOptions == nil || scc.SELinuxContext.SELinuxOptions.Type != sel.Type {
		t.Errorf("SELinux: pod %+v, SCC %+v; want spc_t on the pod and the SCC pinned to it", sel, scc.SELinuxContext)
	}
	if pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		!slices.Equal(scc.SeccompProfiles, []string{"runtime/default"}) {
		t.Errorf("seccomp: pod %+v, SCC %v; want RuntimeDefault allowed as runtime/default", pod.SecurityContext.SeccompProfile, scc.SeccompProfiles)
	}
}
