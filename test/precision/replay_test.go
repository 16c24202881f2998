package precision

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/quota-exporter/quota_exporter/test/e2e/stack"
	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// repoRoot is testenv.RepoRoot.
var repoRoot = testenv.RepoRoot

// TestRecordedWorkloads runs the rendered rules (alerts/quota-*.yaml, as shipped: real `for`
// durations and thresholds) with promtool over the recorded expositions of the real exporter
// watching issue 25's archetypes and the seed cases (testdata/, make record-workloads), and
// asserts which alerts fired during the recording, with which severity and names, and that
// nothing else did: the healthy archetypes page nothing, each planted problem pages once.
func TestRecordedWorkloads(t *testing.T) {
	recorded := map[string]bool{}
	for _, g := range Groups() {
		dir := filepath.Join("testdata", fmt.Sprintf("group%d", g))
		m, err := ReadManifest(filepath.Join(dir, "manifest.json"))
		if err != nil {
			t.Fatalf("group %d: %v (make record-workloads)", g, err)
		}
		for s := range m.Scenarios {
			recorded[s] = true
		}
		t.Run(fmt.Sprintf("group%d", g), func(t *testing.T) { replay(t, dir, m) })
	}
	for _, a := range Archetypes {
		if !recorded[a.Scenario] {
			t.Errorf("no recording has scenario %s: run make record-workloads", a.Scenario)
		}
	}
}

// replay runs the rules over one group's recording and asserts what fired for the
// archetypes it holds.
func replay(t *testing.T, dir string, m Manifest) {
	root := repoRoot()
	scrapes, err := ReadRecording(filepath.Join(dir, "recording.txt.gz"))
	if err != nil {
		t.Fatal(err)
	}
	series, steps, err := ToSeries(scrapes, m)
	if err != nil {
		t.Fatal(err)
	}
	interval, _ := time.ParseDuration(m.Interval)
	end := time.Duration(steps-1) * interval
	t.Logf("recording: %d scrapes over %s (revision %s), %d input series", len(scrapes), end, m.Revision, len(series))

	var want []map[string]any
	for _, a := range Archetypes {
		id, ok := m.Scenarios[a.Scenario]
		if !ok {
			continue
		}
		for _, f := range a.Want {
			if a.Healthy && Pages(f.Severity) {
				t.Fatalf("%s is healthy but expects a page (%s %s)", a.Scenario, f.Alert, f.Severity)
			}
			l := fmt.Sprintf(`{alertname=%q, severity=%q, namespace=%q, pod=%q`, f.Alert, f.Severity, id.Namespace, id.Pod)
			if !f.Pod {
				l += fmt.Sprintf(`, container=%q`, id.Container)
			}
			want = append(want, map[string]any{"labels": l + "}", "value": 1})
		}
	}
	sort.Slice(want, func(i, j int) bool { return want[i]["labels"].(string) < want[j]["labels"].(string) })

	// Every alert that fired at any evaluation of the recording, by name, severity and the
	// Kubernetes names it carries.
	fired := fmt.Sprintf(`group by (alertname, severity, namespace, pod, container) (last_over_time(ALERTS{alertstate="firing"}[%ds]))`, int(end.Seconds()))
	// QUOTA_PRECISION_RULES: another build's rendered rules (a directory with quota-*.yaml), e.g. to
	// see what the rules before a change raise on the same recording.
	rules := filepath.Join(root, "alerts")
	if d := os.Getenv("QUOTA_PRECISION_RULES"); d != "" {
		rules = d
	}
	test := map[string]any{
		"rule_files":          []string{filepath.Join(rules, "quota-rules.yaml"), filepath.Join(rules, "quota-alerts.yaml")},
		"evaluation_interval": m.Interval,
		"tests": []any{map[string]any{
			"name":             "recorded workloads: " + m.Started.Format(time.RFC3339),
			"interval":         m.Interval,
			"input_series":     series,
			"promql_expr_test": []any{map[string]any{"expr": fired, "eval_time": fmt.Sprintf("%ds", int(end.Seconds())), "exp_samples": want}},
		}},
	}
	b, err := yaml.Marshal(test)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "recorded_test.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	promtool, err := stack.ToolPath(ctx, root, "tools", "promtool")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, promtool, "test", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules over the recording: %v\n%s", err, trim(string(out)))
	}
	t.Logf("promtool: %s", strings.TrimSpace(string(out)))
}

func trim(s string) string {
	if len(s) > 20000 {
		return s[:20000] + "..."
	}
	return s
}
