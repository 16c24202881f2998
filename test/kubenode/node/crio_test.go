package node

import (
	"archive/tar"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The pieces of the CRI-O node that run on this host: the archive's tags as the CRI names
// them, and the sandboxes from CRI-O's log lines.
func TestCRIOHelpers(t *testing.T) {
	for in, want := range map[string]string{
		"quota-exporter:0.1.0":                        "docker.io/library/quota-exporter:0.1.0",
		"quota-kubenode/pause:test":                   "docker.io/quota-kubenode/pause:test",
		"ghcr.io/quota-exporter/quota-exporter:0.1.0": "ghcr.io/quota-exporter/quota-exporter:0.1.0",
		"localhost/x:1":                               "localhost/x:1",
		"registry:5000/x:1":                           "registry:5000/x:1",
	} {
		if got := normalizedRef(in); got != want {
			t.Errorf("normalizedRef(%s) = %s, want %s", in, got, want)
		}
	}
	file := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	manifest := `[{"Config":"c.json","RepoTags":["ghcr.io/quota-exporter/quota-exporter:0.1.0","quota-exporter:0.1.0"],"Layers":["l/layer.tar"]}]`
	if err := tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(manifest))}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(manifest))
	tw.Close()
	f.Close()
	refs, err := archiveRefs(file)
	if want := []string{"ghcr.io/quota-exporter/quota-exporter:0.1.0", "docker.io/library/quota-exporter:0.1.0"}; err != nil || !slices.Equal(refs, want) {
		t.Errorf("archiveRefs = %v, %v; want %v", refs, err, want)
	}
	id := strings.Repeat("ab", 32)
	journal := `level=info msg="Ran pod sandbox ` + id + ` with infra container: kubenode/go-healthy/POD" id=1
level=info msg="Running pod sandbox: kubenode/oom/POD"`
	if got := crioSandboxIDs(journal); !slices.Equal(got, []string{id}) {
		t.Errorf("crioSandboxIDs = %v, want [%s]", got, id)
	}
}
