package mixin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/test/jsonnettool"
)

// mixinDir is the mixin's directory: the name jsonnet-bundler vendors it under.
const mixinDir = "quota-exporter-mixin"

// TestJsonnetBundlerInstall installs the mixin with jb from this checkout into an empty project,
// as the README tells users to (a local source instead of the git one), and renders it through
// the vendored import path: the alerts, rules and dashboards must equal the committed files.
func TestJsonnetBundlerInstall(t *testing.T) {
	project := t.TempDir()
	src, err := filepath.Abs(filepath.Join(root, mixinDir))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(project, src)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init"}, {"install", rel}} {
		if _, err := jsonnettool.Run(root, project, "jb", args...); err != nil {
			t.Fatal(err)
		}
	}
	// jb records the local source and links vendor/<directory name> to it.
	var file struct {
		Dependencies []struct {
			Source struct {
				Local *struct{ Directory string } `json:"local"`
			} `json:"source"`
		} `json:"dependencies"`
	}
	b, err := os.ReadFile(filepath.Join(project, "jsonnetfile.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Dependencies) != 1 || file.Dependencies[0].Source.Local == nil || file.Dependencies[0].Source.Local.Directory != rel {
		t.Fatalf("jsonnetfile.json after jb install: %s", b)
	}
	if _, err := os.Stat(filepath.Join(project, "vendor", mixinDir, "mixin.libsonnet")); err != nil {
		t.Fatalf("jb did not vendor the mixin as %s: %v", mixinDir, err)
	}

	// The rule files as render/*.jsonnet write them (without their header comment).
	consumer := `local quota = import '` + mixinDir + `/mixin.libsonnet';
local yaml(x) = std.manifestYamlDoc(x, indent_array_in_object=false, quote_keys=false);
{ alerts: yaml(quota.prometheusAlerts), rules: yaml(quota.prometheusRules), dashboards: quota.grafanaDashboards }
`
	if err := os.WriteFile(filepath.Join(project, "main.jsonnet"), []byte(consumer), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := jsonnettool.Run(root, project, "jsonnet", "-J", "vendor", "main.jsonnet")
	if err != nil {
		t.Fatal(err)
	}
	var rendered struct {
		Alerts, Rules string
		Dashboards    map[string]any
	}
	if err := json.Unmarshal(out, &rendered); err != nil {
		t.Fatal(err)
	}
	sameText(t, rendered.Alerts, "alerts/quota-alerts.yaml")
	sameText(t, rendered.Rules, "alerts/quota-rules.yaml")
	files := dashboardFiles(t)
	if len(rendered.Dashboards) != len(files) {
		t.Errorf("%d dashboards from the vendored mixin, %d in dashboards/", len(rendered.Dashboards), len(files))
	}
	for _, f := range files {
		sameJSON(t, rendered.Dashboards[filepath.Base(f)], strings.TrimPrefix(f, root+string(filepath.Separator)))
	}
}

// sameText fails unless got is file (relative to root) without its first line, the header comment
// (and the trailing newlines that jsonnet -S adds).
func sameText(t *testing.T, got, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	_, want, _ := strings.Cut(string(b), "\n")
	if got != strings.TrimRight(want, "\n") {
		t.Errorf("the vendored mixin renders %s differently (run make mixin)", file)
	}
}

// sameJSON fails unless got equals the JSON document in file (relative to root).
func sameJSON(t *testing.T, got any, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the vendored mixin renders %s differently (run make mixin)", file)
	}
}
