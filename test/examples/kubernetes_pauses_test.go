package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// component is the subset of kustomize's Component used by examples/kubernetes/pauses.
type component struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Patches    []struct {
		Path string `json:"path"`
	} `json:"patches"`
}

// TestPausesComponent checks the opt-in BPF component's patch against the base DaemonSet. A
// strategic merge patch replaces lists of strings whole, so the patch must repeat the base's args
// and capabilities: they must be the base's followed by the two collectors and by BPF and
// PERFMON, and the patch may set nothing else (no privileged, no host mounts, no pod changes).
// Where kubectl is installed (it is not a project dependency) its kustomize renders the base with
// the component enabled, and the rendered DaemonSet is checked the same way.
func TestPausesComponent(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "examples", "kubernetes")
	var k component
	if err := decodeStrict(readFile(t, filepath.Join(dir, "pauses", "kustomization.yaml")), &k); err != nil {
		t.Fatalf("pauses/kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1alpha1" || k.Kind != "Component" || len(k.Patches) != 1 {
		t.Fatalf("pauses/kustomization.yaml: want a Component with one patch, got %+v", k)
	}
	if !strings.Contains(string(readFile(t, filepath.Join(dir, "kustomization.yaml"))), "\n# components:\n#   - pauses\n") {
		t.Error("kustomization.yaml does not offer the pauses component (a commented components: block)")
	}
	var patch appsv1.DaemonSet
	if err := decodeStrict(readFile(t, filepath.Join(dir, "pauses", k.Patches[0].Path)), &patch); err != nil {
		t.Fatalf("%s: %v", k.Patches[0].Path, err)
	}
	_, m := loadManifests(t)
	if len(m.daemonSets) != 1 {
		t.Fatalf("want one base DaemonSet, got %d", len(m.daemonSets))
	}
	base := m.daemonSets[0]
	if patch.APIVersion != "apps/v1" || patch.Kind != "DaemonSet" || patch.Name != base.Name {
		t.Fatalf("the patch targets %s %s %q, the base is DaemonSet %q", patch.APIVersion, patch.Kind, patch.Name, base.Name)
	}
	pc := patch.Spec.Template.Spec.Containers
	if len(pc) != 1 || pc[0].Name != base.Spec.Template.Spec.Containers[0].Name || pc[0].SecurityContext == nil || pc[0].SecurityContext.Capabilities == nil {
		t.Fatalf("the patch must name the base's container and set its capabilities: %+v", pc)
	}
	checkPauseContainer(t, base.Spec.Template.Spec.Containers[0], pc[0].Args, pc[0].SecurityContext.Capabilities.Add)
	// Nothing else: clear what was checked and compare with an empty patch.
	c := pc[0]
	c.Name, c.Args, c.SecurityContext.Capabilities.Add = "", nil, nil
	if !reflect.DeepEqual(c, corev1.Container{SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{}}}) {
		t.Errorf("the patch sets more of the container than args and capabilities.add: %+v", c)
	}
	patch.Spec.Template.Spec.Containers = nil
	patch.TypeMeta, patch.ObjectMeta = base.TypeMeta, base.ObjectMeta
	if !reflect.DeepEqual(patch, appsv1.DaemonSet{TypeMeta: base.TypeMeta, ObjectMeta: base.ObjectMeta}) {
		t.Errorf("the patch changes the DaemonSet outside its container: %+v", patch.Spec)
	}

	t.Run("kubectl kustomize", func(t *testing.T) {
		kubectl, err := exec.LookPath("kubectl")
		if err != nil {
			t.Skip("kubectl not installed (not a project dependency); the patch was checked above")
		}
		tmp := t.TempDir()
		if err := os.CopyFS(tmp, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		kf := filepath.Join(tmp, "kustomization.yaml")
		enabled := strings.Replace(string(readFile(t, kf)), "# components:\n#   - pauses\n", "components:\n  - pauses\n", 1)
		if err := os.WriteFile(kf, []byte(enabled), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(kubectl, "kustomize", tmp).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize: %v", err)
		}
		var got *appsv1.DaemonSet
		for _, doc := range splitDocs(out) {
			var ds appsv1.DaemonSet
			if sigsyaml.Unmarshal(doc, &ds) == nil && ds.Kind == "DaemonSet" {
				got = &ds
			}
		}
		if got == nil || len(got.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("no DaemonSet with one container in the rendered output")
		}
		rc, bc := got.Spec.Template.Spec.Containers[0], base.Spec.Template.Spec.Containers[0]
		checkPauseContainer(t, bc, rc.Args, rc.SecurityContext.Capabilities.Add)
		rc.Args, bc.Args = nil, nil
		rc.SecurityContext.Capabilities.Add, bc.SecurityContext.Capabilities.Add = nil, nil
		if !reflect.DeepEqual(rc, bc) {
			t.Errorf("rendered container differs from the base beyond args and capabilities:\n got %+v\nwant %+v", rc, bc)
		}
		if !reflect.DeepEqual(got.Spec.Template.Spec.Volumes, base.Spec.Template.Spec.Volumes) || got.Spec.Template.Spec.HostPID != base.Spec.Template.Spec.HostPID {
			t.Error("rendered pod's volumes or hostPID differ from the base")
		}
	})
}

// checkPauseContainer: args and added capabilities are the base container's plus the two
// collectors and CAP_BPF/CAP_PERFMON, and nothing like SYS_ADMIN.
func checkPauseContainer(t *testing.T, base corev1.Container, args []string, caps []corev1.Capability) {
	t.Helper()
	if want := append(slices.Clone(base.Args), "--collector.gopause", "--collector.cfsstall"); !reflect.DeepEqual(args, want) {
		t.Errorf("args %q, want the base's followed by the two collectors %q", args, want)
	}
	if want := append(slices.Clone(base.SecurityContext.Capabilities.Add), "BPF", "PERFMON"); !reflect.DeepEqual(caps, want) {
		t.Errorf("capabilities add %v, want the base's plus BPF and PERFMON %v", caps, want)
	}
}
