// Command alertdiff checks that two versions of the rendered rules raise the same alerts at the
// same times: on the input series of every promtool test case (quota-exporter-mixin/tests) and
// on the recorded workloads (test/precision/testdata), it evaluates both rule sets side by side
// in one promtool run and fails on any ALERTS series (name, labels, pending or firing) present
// at an evaluation in one and not in the other. Descriptions may differ; alerts may not.
//
//	git archive REV | tar -x -C DIR
//	go run ./mixin/cmd/alertdiff -root .. -baseline DIR   (from test/)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/quota-exporter/quota_exporter/test/e2e/stack"
	"github.com/quota-exporter/quota_exporter/test/jsonnettool"
	"github.com/quota-exporter/quota_exporter/test/precision"
)

func main() {
	root := flag.String("root", "..", "the tree under test (alerts/, quota-exporter-mixin/, test/precision/testdata)")
	baseline := flag.String("baseline", "", "the tree whose alerts must be matched")
	only := flag.String("run", "", "regexp: only the cases whose name matches")
	flag.Parse()
	if *baseline == "" {
		fmt.Fprintln(os.Stderr, "alertdiff: -baseline is required")
		os.Exit(2)
	}
	d, err := newDiff(*root, *baseline, *only)
	if err == nil {
		err = d.run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "alertdiff:", err)
		os.Exit(1)
	}
}

type differ struct {
	root, baseline, work, promtool string
	only                           *regexp.Regexp
	cases, failed                  int
}

func newDiff(root, baseline, only string) (*differ, error) {
	work, err := os.MkdirTemp("", "alertdiff-")
	if err != nil {
		return nil, err
	}
	promtool, err := stack.ToolPath(context.Background(), root, "tools", "promtool")
	if err != nil {
		return nil, err
	}
	return &differ{root: root, baseline: baseline, work: work, promtool: promtool, only: regexp.MustCompile(only)}, nil
}

// ruleSet is a pair of rendered files, recording rules and alerts.
type ruleSet struct{ rules, alerts string }

func (d *differ) run() error {
	defer os.RemoveAll(d.work)
	sets := map[string][2]ruleSet{} // variant -> new, old
	for _, v := range []string{"default", "ksm", "batch"} {
		var pair [2]ruleSet
		for i, tree := range []string{d.root, d.baseline} {
			rs, err := d.render(tree, v, fmt.Sprintf("%s-%d", v, i))
			if err != nil {
				return err
			}
			pair[i] = rs
		}
		old, err := d.prefixOld(pair[1], v)
		if err != nil {
			return err
		}
		pair[1] = old
		sets[v] = pair
	}
	suites := map[string]string{"alerts_test.yaml": "default", "exporter_missing_test.yaml": "default", "ksm_test.yaml": "ksm", "batch_test.yaml": "batch"}
	names := make([]string, 0, len(suites))
	for n := range suites {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := d.suite(filepath.Join(d.root, "quota-exporter-mixin", "tests", n), sets[suites[n]]); err != nil {
			return err
		}
	}
	for _, g := range precision.Groups() {
		if err := d.recording(g, sets["default"]); err != nil {
			return err
		}
	}
	fmt.Printf("%d cases, %d with different alerts\n", d.cases, d.failed)
	if d.failed > 0 {
		return fmt.Errorf("%d cases differ", d.failed)
	}
	return nil
}

// render gives a tree's rendered rules: alerts/ for the default variant, the test's jsonnet for
// the others.
func (d *differ) render(tree, variant, name string) (ruleSet, error) {
	if variant == "default" {
		return ruleSet{filepath.Join(tree, "alerts", "quota-rules.yaml"), filepath.Join(tree, "alerts", "quota-alerts.yaml")}, nil
	}
	dir := filepath.Join(d.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ruleSet{}, err
	}
	src, err := filepath.Abs(filepath.Join(tree, "quota-exporter-mixin", "tests", variant+".jsonnet"))
	if err != nil {
		return ruleSet{}, err
	}
	if _, err := jsonnettool.Run(d.root, dir, "jsonnet", "-S", "-m", dir, src); err != nil {
		return ruleSet{}, err
	}
	return ruleSet{filepath.Join(dir, "quota-rules.yaml"), filepath.Join(dir, "quota-alerts.yaml")}, nil
}

type ruleFile struct {
	Groups []map[string]any `yaml:"groups"`
}

var token = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

// prefixOld renames the baseline's groups (old-), recording rules (old_) and alerts (Old) so
// that both sets can be evaluated together; references to its recording rules follow.
func (d *differ) prefixOld(rs ruleSet, variant string) (ruleSet, error) {
	files := map[string]*ruleFile{}
	recorded := map[string]bool{}
	for _, p := range []string{rs.rules, rs.alerts} {
		var f ruleFile
		b, err := os.ReadFile(p)
		if err != nil {
			return rs, err
		}
		if err := yaml.Unmarshal(b, &f); err != nil {
			return rs, fmt.Errorf("%s: %w", p, err)
		}
		files[p] = &f
		for _, g := range f.Groups {
			for _, r := range g["rules"].([]any) {
				if rec, ok := r.(map[string]any)["record"].(string); ok {
					recorded[rec] = true
				}
			}
		}
	}
	rename := func(s string) string {
		return token.ReplaceAllStringFunc(s, func(t string) string {
			if recorded[t] {
				return "old_" + t
			}
			return t
		})
	}
	out := ruleSet{filepath.Join(d.work, variant+"-old-rules.yaml"), filepath.Join(d.work, variant+"-old-alerts.yaml")}
	for i, p := range []string{rs.rules, rs.alerts} {
		f := files[p]
		for _, g := range f.Groups {
			g["name"] = "old-" + g["name"].(string)
			for _, r := range g["rules"].([]any) {
				r := r.(map[string]any)
				if rec, ok := r["record"].(string); ok {
					r["record"] = "old_" + rec
				}
				if a, ok := r["alert"].(string); ok {
					r["alert"] = "Old" + a
				}
				r["expr"] = rename(r["expr"].(string))
				if ann, ok := r["annotations"].(map[string]any); ok {
					for k, v := range ann {
						ann[k] = rename(v.(string))
					}
				}
			}
		}
		b, err := yaml.Marshal(f)
		if err != nil {
			return rs, err
		}
		if err := os.WriteFile([]string{out.rules, out.alerts}[i], b, 0o644); err != nil {
			return rs, err
		}
	}
	return out, nil
}

// groupNames lists a rule file's group names in order.
func groupNames(path string) ([]string, error) {
	var f ruleFile
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	var names []string
	for _, g := range f.Groups {
		names = append(names, g["name"].(string))
	}
	return names, nil
}

type testCase struct {
	Name          string           `yaml:"name"`
	Interval      string           `yaml:"interval"`
	InputSeries   []map[string]any `yaml:"input_series"`
	AlertRuleTest []struct {
		EvalTime string `yaml:"eval_time"`
	} `yaml:"alert_rule_test"`
	PromQLExprTest []struct {
		EvalTime string `yaml:"eval_time"`
	} `yaml:"promql_expr_test"`
}

// suite runs every case of a promtool test file against both rule sets, up to the case's last
// evaluation time.
func (d *differ) suite(path string, sets [2]ruleSet) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var suite struct {
		EvaluationInterval string     `yaml:"evaluation_interval"`
		Tests              []testCase `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &suite); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for i, tc := range suite.Tests {
		name := fmt.Sprintf("%s #%d: %s", filepath.Base(path), i+1, tc.Name)
		if !d.only.MatchString(name) {
			continue
		}
		var end time.Duration
		for _, t := range tc.AlertRuleTest {
			end = max(end, mustDuration(t.EvalTime))
		}
		for _, t := range tc.PromQLExprTest {
			end = max(end, mustDuration(t.EvalTime))
		}
		interval := tc.Interval
		if interval == "" {
			interval = suite.EvaluationInterval
		}
		if err := d.compare(name, sets, suite.EvaluationInterval, interval, tc.InputSeries, end); err != nil {
			return err
		}
	}
	return nil
}

// recording replays one group of recorded workloads through both rule sets.
func (d *differ) recording(group int, sets [2]ruleSet) error {
	dir := filepath.Join(d.root, "test", "precision", "testdata", fmt.Sprintf("group%d", group))
	m, err := precision.ReadManifest(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return err
	}
	scrapes, err := precision.ReadRecording(filepath.Join(dir, "recording.txt.gz"))
	if err != nil {
		return err
	}
	series, steps, err := precision.ToSeries(scrapes, m)
	if err != nil {
		return err
	}
	in := make([]map[string]any, len(series))
	for i, s := range series {
		in[i] = map[string]any{"series": s.Series, "values": s.Values}
	}
	name := fmt.Sprintf("recorded workloads group%d", group)
	if !d.only.MatchString(name) {
		return nil
	}
	end := time.Duration(steps-1) * mustDuration(m.Interval)
	return d.compare(name, sets, m.Interval, m.Interval, in, end)
}

// compare evaluates both rule sets over the input series from 0 to end and reports every alert
// (renamed back, with its state and labels) that one raised at some evaluation and the other did not.
func (d *differ) compare(name string, sets [2]ruleSet, evalInterval, interval string, input []map[string]any, end time.Duration) error {
	d.cases++
	var order []string
	for _, p := range []string{sets[0].rules, sets[1].rules, sets[0].alerts, sets[1].alerts} {
		g, err := groupNames(p)
		if err != nil {
			return err
		}
		order = append(order, g...)
	}
	step := mustDuration(evalInterval)
	old := `label_replace(ALERTS{alertname=~"Old.+"}, "alertname", "$1", "alertname", "Old(.+)")`
	cur := `ALERTS{alertname!~"Old.+"}`
	window := fmt.Sprintf("[%ds:%ds]", int(end.Seconds()), int(step.Seconds()))
	test := map[string]any{
		"rule_files":          []string{abs(sets[0].rules), abs(sets[0].alerts), abs(sets[1].rules), abs(sets[1].alerts)},
		"evaluation_interval": evalInterval,
		"group_eval_order":    order,
		"tests": []any{map[string]any{
			"name":         name,
			"interval":     interval,
			"input_series": input,
			"promql_expr_test": []any{
				map[string]any{"expr": fmt.Sprintf("count_over_time((%s unless %s)%s)", old, cur, window), "eval_time": fmtDuration(end), "exp_samples": []any{}},
				map[string]any{"expr": fmt.Sprintf("count_over_time((%s unless %s)%s)", cur, old, window), "eval_time": fmtDuration(end), "exp_samples": []any{}},
			},
		}},
	}
	b, err := yaml.Marshal(test)
	if err != nil {
		return err
	}
	path := filepath.Join(d.work, fmt.Sprintf("case%d_test.yaml", d.cases))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	out, err := exec.Command(d.promtool, "test", "rules", path).CombinedOutput()
	if err != nil {
		d.failed++
		fmt.Printf("DIFFERENT %s (first line: the baseline's alerts missing now; second: alerts only now)\n%s\n", name, trim(string(out)))
		return nil
	}
	fmt.Printf("same      %s\n", name)
	return nil
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(fmt.Sprintf("duration %q: %v", s, err))
	}
	return d
}

func fmtDuration(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) }

func trim(s string) string {
	if len(s) > 6000 {
		return s[:6000] + "..."
	}
	return strings.TrimSpace(s)
}
