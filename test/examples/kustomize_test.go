package examples

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// kustomizeBuild renders a kustomization with kustomize's own library (what `kubectl kustomize`
// and `kubectl apply -k` run) and strictly decodes every object.
func kustomizeBuild(t *testing.T, dir string) Manifests {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var m Manifests
	for i, doc := range splitDocs(out) {
		if err := m.Decode(doc); err != nil {
			t.Errorf("kustomize build %s, doc %d: %v", dir, i, err)
		}
	}
	return m
}

// copyExample copies examples/kubernetes into a temporary directory and returns that directory.
func copyExample(t *testing.T) string {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "kubernetes")
	if err := os.CopyFS(tmp, os.DirFS(filepath.Join(testenv.RepoRoot(), "examples", "kubernetes"))); err != nil {
		t.Fatal(err)
	}
	return tmp
}

func renderedImage(t *testing.T, m Manifests) string {
	t.Helper()
	if len(m.DaemonSets) != 1 || len(m.DaemonSets[0].Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one DaemonSet with one container")
	}
	return m.DaemonSets[0].Spec.Template.Spec.Containers[0].Image
}

// TestKustomizeImage: the kustomization's images entry names the image daemonset.yaml runs, so
// that setting its newName and newTag (the README's way to run a mirror or your own build), or an
// overlay's images entry of the same name, really changes what runs. Rendered by kustomize.
func TestKustomizeImage(t *testing.T) {
	version, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	const repo = "ghcr.io/quota-exporter/quota-exporter"
	if got, want := renderedImage(t, kustomizeBuild(t, filepath.Join(testenv.RepoRoot(), "examples", "kubernetes"))),
		repo+":"+strings.TrimSpace(string(version)); got != want {
		t.Errorf("kubectl apply -k examples/kubernetes runs %s, want %s (the release of VERSION)", got, want)
	}

	// The user's edit: newName and newTag of the shipped entry.
	dir := copyExample(t)
	kf := filepath.Join(dir, "kustomization.yaml")
	var k map[string]any
	if err := sigsyaml.Unmarshal(readFile(t, kf), &k); err != nil {
		t.Fatal(err)
	}
	images, _ := k["images"].([]any)
	if len(images) != 1 {
		t.Fatalf("kustomization.yaml has %d images entries, want 1", len(images))
	}
	entry := images[0].(map[string]any)
	entry["newName"], entry["newTag"] = "registry.example.com/mirror/quota-exporter", "9.9.9-rc.1"
	b, err := sigsyaml.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := renderedImage(t, kustomizeBuild(t, dir)), "registry.example.com/mirror/quota-exporter:9.9.9-rc.1"; got != want {
		t.Errorf("with the images entry's newName and newTag set, the DaemonSet runs %s, want %s: the entry's name (%v) does not match daemonset.yaml's image", got, want, entry["name"])
	}

	// An overlay over the unchanged example, as test/kubenode and GitOps repositories do.
	overlay := filepath.Dir(copyExample(t))
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - kubernetes" +
		"\nimages:\n  - name: " + repo + "\n    newName: quota-exporter\n    newTag: dev\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := renderedImage(t, kustomizeBuild(t, overlay)); got != "quota-exporter:dev" {
		t.Errorf("an overlay's images entry for %s: the DaemonSet runs %s, want quota-exporter:dev", repo, got)
	}
}
