package chart

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// valuePaths lists the leaves of values.yaml as dotted paths (a list, a scalar or an empty map is
// a leaf).
func valuePaths(prefix string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return []string{prefix}
	}
	var out []string
	for k, sub := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out = append(out, valuePaths(p, sub)...)
	}
	return out
}

var backticked = regexp.MustCompile("`([A-Za-z][A-Za-z0-9.]*)`")

// readmeValueNames returns the values the README's values table names in its first column: a
// dotted name stands for itself and everything below it; a bare name after a dotted one in the
// same cell is that one's sibling (`prometheus.podMonitor.sampleLimit`, `labelLimit`).
func readmeValueNames(readme string) []string {
	_, table, ok := strings.Cut(readme, "\n## Values\n")
	if !ok {
		return nil
	}
	var names []string
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "|") {
			continue
		}
		parent := ""
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			name := m[1]
			if i := strings.LastIndex(name, "."); i >= 0 {
				parent = name[:i]
			} else if parent != "" {
				name = parent + "." + name
			}
			names = append(names, name)
		}
	}
	return names
}

// TestChartReadmeNamesEveryValue: the README's values table names every value of values.yaml
// (itself or a group it belongs to), so that a new value cannot go undocumented.
func TestChartReadmeNamesEveryValue(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := sigsyaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := readmeValueNames(string(readme))
	if len(names) == 0 {
		t.Fatal("README.md has no values table (## Values)")
	}
	paths := valuePaths("", values)
	slices.Sort(paths)
	for _, p := range paths {
		if !slices.ContainsFunc(names, func(n string) bool { return p == n || strings.HasPrefix(p, n+".") }) {
			t.Errorf("values.yaml's %s is not in the README's values table", p)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(paths, func(p string) bool { return p == n || strings.HasPrefix(p, n+".") }) {
			t.Errorf("the README's values table names %s, which values.yaml does not have", n)
		}
	}
}
