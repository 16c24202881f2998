package examples

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// Grafana's file provisioning schema (apiVersion 1), as far as the example uses it: unknown
// keys fail the decode, so a misspelt key that Grafana would silently ignore is caught.
type grafanaDatasources struct {
	APIVersion  int `yaml:"apiVersion"`
	Datasources []struct {
		Name      string         `yaml:"name"`
		Type      string         `yaml:"type"`
		UID       string         `yaml:"uid"`
		Access    string         `yaml:"access"`
		URL       string         `yaml:"url"`
		IsDefault bool           `yaml:"isDefault"`
		Editable  bool           `yaml:"editable"`
		JSONData  map[string]any `yaml:"jsonData"`
	} `yaml:"datasources"`
}

type grafanaDashboardProviders struct {
	APIVersion int `yaml:"apiVersion"`
	Providers  []struct {
		Name                  string `yaml:"name"`
		OrgID                 int    `yaml:"orgId"`
		Folder                string `yaml:"folder"`
		Type                  string `yaml:"type"`
		DisableDeletion       bool   `yaml:"disableDeletion"`
		AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
		UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
		Options               struct {
			Path                      string `yaml:"path"`
			FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
		} `yaml:"options"`
	} `yaml:"providers"`
}

func decodeYAMLStrict(t *testing.T, path string, into any) {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(readFile(t, path)))
	dec.KnownFields(true)
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// The compose stack's Grafana provisioning: a Prometheus datasource pointing at the compose
// Prometheus service, and a dashboard provider reading the directory the compose file mounts
// the rendered dashboards into.
func TestGrafanaProvisioning(t *testing.T) {
	root := testenv.RepoRoot()
	dir := filepath.Join(root, "examples", "docker-compose", "grafana", "provisioning")
	var ds grafanaDatasources
	decodeYAMLStrict(t, filepath.Join(dir, "datasources", "prometheus.yml"), &ds)
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 {
		t.Fatalf("datasources: %+v", ds)
	}
	d := ds.Datasources[0]
	if d.Type != "prometheus" || d.URL != "http://prometheus:9090" || !d.IsDefault || d.Access != "proxy" {
		t.Errorf("datasource %+v: want the default prometheus datasource at http://prometheus:9090 (the compose service)", d)
	}

	var dp grafanaDashboardProviders
	decodeYAMLStrict(t, filepath.Join(dir, "dashboards", "quota-exporter.yml"), &dp)
	if dp.APIVersion != 1 || len(dp.Providers) != 1 || dp.Providers[0].Type != "file" {
		t.Fatalf("dashboard providers: %+v", dp)
	}
	compose := string(readFile(t, filepath.Join(root, "examples", "docker-compose", "docker-compose.yml")))
	mount := "../../dashboards:" + dp.Providers[0].Options.Path + ":ro"
	if !strings.Contains(compose, mount) {
		t.Errorf("docker-compose.yml does not mount the rendered dashboards where the provider reads them (%s)", mount)
	}
	if !strings.Contains(compose, "./grafana/provisioning:/etc/grafana/provisioning") {
		t.Error("docker-compose.yml does not mount the provisioning directory at /etc/grafana/provisioning")
	}
}

// run.sh parses (bash -n); the end-to-end test runs it for real.
func TestRunScriptSyntax(t *testing.T) {
	root := testenv.RepoRoot()
	out, err := execCommand("bash", "-n", filepath.Join(root, "examples", "workloads", "run.sh"))
	if err != nil {
		t.Errorf("bash -n run.sh: %v\n%s", err, out)
	}
}

func execCommand(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}
