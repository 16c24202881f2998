package examples

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// component is the subset of kustomize's Component used by examples/kubernetes/pauses and web-tls.
type component struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources,omitempty"`
	Patches    []struct {
		Path   string `json:"path"`
		Target struct {
			Group   string `json:"group"`
			Version string `json:"version"`
			Kind    string `json:"kind"`
			Name    string `json:"name"`
		} `json:"target"`
	} `json:"patches"`
}

// patchOp is one RFC 6902 operation, decoded strictly.
type patchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// rendered is the base kustomization with some components applied: the DaemonSet and the
// PodMonitor after the patches, and the components' own resources.
type rendered struct {
	ds  appsv1.DaemonSet
	pm  monitoringv1.PodMonitor
	ops map[string][]patchOp // component -> its operations, in order
	m   Manifests            // the components' resources
}

// applyComponents applies the components' JSON patches to the base DaemonSet and PodMonitor
// with a JSON patch library, as kustomize does, and strictly decodes the results.
func applyComponents(t *testing.T, names ...string) rendered {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), "examples", "kubernetes")
	_, base := loadManifests(t)
	if len(base.DaemonSets) != 1 || len(base.PodMonitors) != 1 {
		t.Fatalf("want one base DaemonSet and PodMonitor, got %d and %d", len(base.DaemonSets), len(base.PodMonitors))
	}
	objs := map[string][]byte{}
	for kind, v := range map[string]any{"DaemonSet": base.DaemonSets[0], "PodMonitor": base.PodMonitors[0]} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		objs[kind] = b
	}
	r := rendered{ops: map[string][]patchOp{}}
	for _, name := range names {
		var k component
		if err := decodeStrict(readFile(t, filepath.Join(dir, name, "kustomization.yaml")), &k); err != nil {
			t.Fatalf("%s/kustomization.yaml: %v", name, err)
		}
		if k.APIVersion != "kustomize.config.k8s.io/v1alpha1" || k.Kind != "Component" {
			t.Fatalf("%s/kustomization.yaml: want a Component, got %s %s", name, k.APIVersion, k.Kind)
		}
		for _, res := range k.Resources {
			for i, doc := range splitDocs(readFile(t, filepath.Join(dir, name, res))) {
				if err := r.m.Decode(doc); err != nil {
					t.Errorf("%s/%s doc %d: %v", name, res, i, err)
				}
			}
		}
		for _, p := range k.Patches {
			var want string
			switch p.Target.Kind {
			case "DaemonSet":
				want = "apps/v1/" + base.DaemonSets[0].Name
			case "PodMonitor":
				want = "monitoring.coreos.com/v1/" + base.PodMonitors[0].Name
			}
			if got := p.Target.Group + "/" + p.Target.Version + "/" + p.Target.Name; got != want {
				t.Fatalf("%s: patch %s targets %s %s, not a base object (%s)", name, p.Path, p.Target.Kind, got, want)
			}
			var ops []patchOp
			if err := decodeStrict(readFile(t, filepath.Join(dir, name, p.Path)), &ops); err != nil {
				t.Fatalf("%s/%s: %v", name, p.Path, err)
			}
			raw, err := json.Marshal(ops)
			if err != nil {
				t.Fatal(err)
			}
			patch, err := jsonpatch.DecodePatch(raw)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, p.Path, err)
			}
			if objs[p.Target.Kind], err = patch.Apply(objs[p.Target.Kind]); err != nil {
				t.Fatalf("%s/%s does not apply to the base %s: %v", name, p.Path, p.Target.Kind, err)
			}
			r.ops[name] = append(r.ops[name], ops...)
		}
	}
	if err := decodeStrict(objs["DaemonSet"], &r.ds); err != nil {
		t.Fatalf("patched DaemonSet: %v", err)
	}
	if err := decodeStrict(objs["PodMonitor"], &r.pm); err != nil {
		t.Fatalf("patched PodMonitor: %v", err)
	}
	return r
}

// TestPausesComponent checks the opt-in BPF component: a JSON patch that only appends the two
// collectors to the args and BPF and PERFMON to the added capabilities, so the rest of the pod
// stays the base's (no privileged, no host mounts, no pod changes), and composes with web-tls.
func TestPausesComponent(t *testing.T) {
	if !strings.Contains(string(readFile(t, filepath.Join(testenv.RepoRoot(), "examples", "kubernetes", "kustomization.yaml"))), "\n# components:\n#   - pauses\n") {
		t.Error("kustomization.yaml does not offer the pauses component (a commented components: block)")
	}
	_, base := loadManifests(t)
	r := applyComponents(t, "pauses")
	const args, caps = "/spec/template/spec/containers/0/args/-", "/spec/template/spec/containers/0/securityContext/capabilities/add/-"
	var got []string
	for _, op := range r.ops["pauses"] {
		var v string
		if op.Op != "add" || (op.Path != args && op.Path != caps) || json.Unmarshal(op.Value, &v) != nil {
			t.Errorf("pauses: operation %s %s %s: want only string appends to the container's args and added capabilities", op.Op, op.Path, op.Value)
		}
		got = append(got, v)
	}
	if want := []string{"--collector.gopause", "--collector.cfsstall", "BPF", "PERFMON"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pauses appends %q, want %q", got, want)
	}
	CheckExporterPod(t, r.ds.Spec.Template.Spec, PodWant{BPF: true})
	checkOnlyArgsAndCaps(t, base.DaemonSets[0], r.ds)
}

// checkOnlyArgsAndCaps: the patched DaemonSet equals the base but for the container's args and
// added capabilities.
func checkOnlyArgsAndCaps(t *testing.T, base, got appsv1.DaemonSet) {
	t.Helper()
	base, got = *base.DeepCopy(), *got.DeepCopy()
	for _, ds := range []*appsv1.DaemonSet{&base, &got} {
		c := &ds.Spec.Template.Spec.Containers[0]
		c.Args, c.SecurityContext.Capabilities.Add = nil, nil
	}
	if !reflect.DeepEqual(base, got) {
		t.Errorf("the component changes the DaemonSet beyond args and capabilities.add")
	}
}

// TestWebTLSComponent checks the TLS and basic auth component: the exporter reads the web config
// Secret's file through --web.config.file, both Secrets are mounted read-only, the probes turn
// into TCP checks, and the PodMonitor scrapes over HTTPS with the CA and the basic auth of the
// shipped Secrets. TestWebConfigServes runs the exporter with that very web config.
func TestWebTLSComponent(t *testing.T) {
	for _, comps := range [][]string{{"web-tls"}, {"pauses", "web-tls"}, {"web-tls", "pauses"}} {
		t.Run(strings.Join(comps, "+"), func(t *testing.T) {
			r := applyComponents(t, comps...)
			pod := r.ds.Spec.Template.Spec
			CheckExporterPod(t, pod, PodWant{BPF: slices.Contains(comps, "pauses"), TCPProbes: true})
			checkWebConfig(t, pod, r.pm, r.m.Secrets)
		})
	}
}

// checkWebConfig ties the pieces of the web component together through their names.
func checkWebConfig(t *testing.T, pod corev1.PodSpec, pm monitoringv1.PodMonitor, secrets []corev1.Secret) {
	t.Helper()
	byName := map[string]corev1.Secret{}
	for _, s := range secrets {
		byName[s.Name] = s
	}
	c := pod.Containers[0]
	file, ok := flagValue(c.Args, "--web.config.file")
	if !ok {
		t.Fatal("args lack --web.config.file")
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name != vm.Name || v.Secret == nil || filepath.Dir(file) != vm.MountPath {
				continue
			}
			s, ok := byName[v.Secret.SecretName]
			if !ok || s.StringData[filepath.Base(file)] == "" {
				t.Errorf("--web.config.file=%s: Secret %s (mounted at %s) has no %s", file, v.Secret.SecretName, vm.MountPath, filepath.Base(file))
			}
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("--web.config.file=%s is in no mounted Secret", file)
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("want one PodMonitor endpoint, got %d", len(pm.Spec.PodMetricsEndpoints))
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	if ep.Scheme == nil || strings.ToLower(ep.Scheme.String()) != "https" {
		t.Errorf("PodMonitor scheme %v, want https", ep.Scheme)
	}
	if ep.BasicAuth == nil {
		t.Fatal("PodMonitor has no basicAuth")
	}
	for _, ref := range []corev1.SecretKeySelector{ep.BasicAuth.Username, ep.BasicAuth.Password} {
		if s, ok := byName[ref.Name]; !ok || s.StringData[ref.Key] == "" {
			t.Errorf("PodMonitor basicAuth reads %s/%s, which the component does not ship", ref.Name, ref.Key)
		}
	}
	if ep.TLSConfig == nil || ep.TLSConfig.CA.Secret == nil || ep.TLSConfig.ServerName == nil || *ep.TLSConfig.ServerName == "" {
		t.Error("PodMonitor tlsConfig must verify the exporter's certificate (a CA and a server name)")
	} else if ca := ep.TLSConfig.CA.Secret.Name; !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == ca
	}) {
		t.Errorf("PodMonitor trusts the CA of Secret %s, which the exporter does not mount its certificate from", ca)
	}
}

// TestComponentsRenderWithKustomize renders the base with both components through kustomize's
// library (what kubectl kustomize runs) and compares the result with the patches applied above;
// every rendered object is decoded strictly.
func TestComponentsRenderWithKustomize(t *testing.T) {
	want := applyComponents(t, "pauses", "web-tls")
	tmp := copyExample(t)
	kf := filepath.Join(tmp, "kustomization.yaml")
	enabled := strings.Replace(string(readFile(t, kf)), "# components:\n#   - pauses\n#   - web-tls\n", "components:\n  - pauses\n  - web-tls\n", 1)
	if err := os.WriteFile(kf, []byte(enabled), 0o644); err != nil {
		t.Fatal(err)
	}
	m := kustomizeBuild(t, tmp)
	if len(m.DaemonSets) != 1 || len(m.PodMonitors) != 1 || len(m.Secrets) != 2 || len(m.NetworkPolicies) != 1 {
		t.Fatalf("rendered %d DaemonSets, %d PodMonitors, %d Secrets, %d NetworkPolicies; want 1, 1, 2, 1",
			len(m.DaemonSets), len(m.PodMonitors), len(m.Secrets), len(m.NetworkPolicies))
	}
	// kustomize sets the namespace; the rest must be what the patches made.
	ds, pm := m.DaemonSets[0], m.PodMonitors[0]
	ds.Namespace, pm.Namespace = "", ""
	if !reflect.DeepEqual(ds.Spec, want.ds.Spec) {
		t.Errorf("kustomize's DaemonSet differs from the patches applied in the test:\n%s", diffJSON(ds.Spec, want.ds.Spec))
	}
	if !reflect.DeepEqual(pm.Spec, want.pm.Spec) {
		t.Errorf("kustomize's PodMonitor differs from the patches applied in the test:\n%s", diffJSON(pm.Spec, want.pm.Spec))
	}
}

func diffJSON(got, want any) string {
	g, _ := json.MarshalIndent(got, "", " ")
	w, _ := json.MarshalIndent(want, "", " ")
	return fmt.Sprintf("got  %s\nwant %s", g, w)
}
