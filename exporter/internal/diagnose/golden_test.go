package diagnose

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/")

// LoadWorkloads reads workloads from JSON (the Workload fields' JSON names) observed over
// window; for fixtures.
func loadWorkloads(t *testing.T, path string, span time.Duration) []Workload {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ws []Workload
	if err := json.Unmarshal(b, &ws); err != nil {
		t.Fatal(err)
	}
	for i := range ws {
		ws[i].Span = span
	}
	return ws
}

// The report of a host modelled on the v2-systemd-kubernetes fixture host (same cgroup
// paths): a JVM with 23 GC threads under a pod's 3-core limit, a container-aware Go under a
// pod-only 0.5-core limit, 64 arenas in a 1-core container, a service at its limit, and an
// unlimited exporter.
func TestGoldenReports(t *testing.T) {
	ws := loadWorkloads(t, filepath.Join("testdata", "workloads.json"), 15*time.Second)
	r := NewReport("live", 15*time.Second, ws, true, time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC))
	for _, c := range []struct {
		file  string
		write func(*bytes.Buffer) error
	}{
		{"report.txt", func(b *bytes.Buffer) error { return WriteText(b, r, Style{}) }},
		{"report.color.txt", func(b *bytes.Buffer) error { return WriteText(b, r, Style{Color: true}) }},
		{"report.md", func(b *bytes.Buffer) error { return WriteMarkdown(b, r) }},
		{"report.json", func(b *bytes.Buffer) error { return WriteJSON(b, r) }},
	} {
		var b bytes.Buffer
		if err := c.write(&b); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "golden", c.file)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update)", err)
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", c.file, b.String())
		}
	}
	if r.ExitCode() != 2 {
		t.Errorf("exit code %d, want 2", r.ExitCode())
	}
}
