// Package mixin checks the rendered monitoring mixin (dashboards/*.json, alerts/*.yaml) the way
// mixtool and Grafana's dashboard linter would, since neither can be installed here.
package mixin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"

	"github.com/quota-exporter/quota_exporter/test/mixin/figures"
)

// root is the repository root (this package is test/mixin).
var root = filepath.Join("..", "..")

// rateSentinel replaces $__rate_interval before parsing, so range windows that came from it can be told
// apart from hard-coded ones.
const rateSentinel = "7777s"

var promql = parser.NewParser(parser.Options{})

// counterFuncs may take a _total counter.
var counterFuncs = map[string]bool{"rate": true, "irate": true, "increase": true, "resets": true}

// externalMetrics are used by the mixin but not exported by quota_exporter: Prometheus's own
// series, the application's Go runtime metrics (goGCPausesSelector, goRuntimeSelector in
// config.libsonnet) and kube-state-metrics (kubeNamesSource, exporterMissingUsesKubeStateMetrics).
var externalMetrics = map[string]bool{
	"up": true, "ALERTS": true, "go_gc_pauses_seconds_bucket": true,
	"go_sched_gomaxprocs_threads": true, "go_sched_pauses_total_gc_seconds_bucket": true,
	"kube_pod_info": true, "kube_pod_container_info": true, "kube_node_info": true,
}

// presenceOnly tells whether a selector at the end of path only says which series exist: below
// a group aggregation through set operations (or, and, unless) and parentheses, which never
// read a value.
func presenceOnly(path []parser.Node) bool {
	for i := len(path) - 1; i >= 0; i-- {
		switch n := path[i].(type) {
		case *parser.ParenExpr:
		case *parser.BinaryExpr:
			if !n.Op.IsSetOperator() {
				return false
			}
		case *parser.AggregateExpr:
			return n.Op == parser.GROUP
		default:
			return false
		}
	}
	return false
}

// counterAsEvent are counters whose raw value may be read: an OOM-kill counter first seen above
// zero (the killed container's cgroup lived between two scrapes) is itself the event that
// increase() cannot see.
var counterAsEvent = map[string]bool{"quota_memory_oom_kills_total": true}

// contractMetrics are agreed between the parallel branches (the lead's contracts) but exported
// only once issue 10's branch is merged: the binding limits and their binding_cgroup label.
// Drop an entry when docs/metrics.md has it.
var contractMetrics = map[string]bool{
	"quota_cpu_binding_limit_cores": true, "quota_memory_binding_limit_bytes": true,
}

// kernelTraced are quota_cpu_ families of the opt-in cfsstall collector (a BPF program in the
// kernel): the cpu collector's golden exposition cannot hold them; docs/metrics.md does, and
// test/v2's TestCFSStallLengths scrapes them from the real exporter.
var kernelTraced = map[string]bool{"quota_cpu_throttle_stall_seconds": true}

func init() { plugins.RegisterDefaultPlugins() }

// ---- the exporter's metric names ----

type exposition struct {
	documented map[string]bool   // names in docs/metrics.md
	golden     map[string]string // family -> TYPE from exporter/**/testdata/*.golden.prom
	goldenCols map[string]bool   // collectors that have golden coverage (quota_exporter_scrape_collector_success{collector})
}

// metricsDoc is the generated list of every metric the exporter exports.
const metricsDoc = "docs/metrics.md"

var metricToken = regexp.MustCompile(`\bquota_[a-z0-9_]+\b`)

func loadExposition(t *testing.T) exposition {
	t.Helper()
	e := exposition{documented: map[string]bool{}, golden: map[string]string{}, goldenCols: map[string]bool{}}
	b, err := os.ReadFile(filepath.Join(root, metricsDoc))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metricToken.FindAllString(string(b), -1) {
		e.documented[m] = true
	}
	if len(e.documented) == 0 {
		t.Fatalf("no metric names in %s", metricsDoc)
	}
	goldens, _ := filepath.Glob(filepath.Join(root, "exporter", "*", "testdata", "*.golden.prom"))
	more, _ := filepath.Glob(filepath.Join(root, "exporter", "*", "*", "testdata", "*.golden.prom"))
	goldens = append(goldens, more...)
	collectorLine := regexp.MustCompile(`^quota_exporter_scrape_collector_success\{.*collector="([^"]+)"`)
	for _, g := range goldens {
		f, err := os.Open(g)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "# TYPE ") {
				fields := strings.Fields(line)
				if len(fields) == 4 {
					e.golden[fields[2]] = fields[3]
				}
			}
			if m := collectorLine.FindStringSubmatch(line); m != nil {
				e.goldenCols[m[1]] = true
			}
		}
		f.Close()
	}
	return e
}

// check returns why name is not a metric the mixin may use, or "".
func (e exposition) check(name string, recorded map[string]bool) string {
	if recorded[name] || externalMetrics[name] {
		return ""
	}
	if contractMetrics[name] && !e.documented[name] {
		return ""
	}
	family, histogramChild := name, false
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base := strings.TrimSuffix(name, suffix); base != name && (e.documented[base] || e.golden[base] != "") {
			family, histogramChild = base, true
		}
	}
	if !e.documented[family] && e.golden[family] == "" {
		return fmt.Sprintf("%s is neither in %s nor in a golden exposition file", name, metricsDoc)
	}
	if typ, ok := e.golden[family]; ok && histogramChild && typ != "histogram" && typ != "summary" {
		return fmt.Sprintf("%s: %s is a %s in the golden exposition, not a histogram", name, family, typ)
	}
	if typ, ok := e.golden[family]; ok && !histogramChild && typ == "histogram" {
		return fmt.Sprintf("%s is a histogram: use _bucket, _count or _sum", name)
	}
	// A collector with golden coverage must expose every name of its subsystem (quota_<collector>_...).
	parts := strings.SplitN(family, "_", 3)
	if len(parts) == 3 && e.goldenCols[parts[1]] && !kernelTraced[family] {
		if _, ok := e.golden[family]; !ok {
			return fmt.Sprintf("%s: the %s collector's golden exposition has no %s", name, parts[1], family)
		}
	}
	return ""
}

// ---- PromQL checks shared by dashboards, alerts and rules ----

type exprCheck struct {
	requireRateInterval bool // dashboards: rate/irate/increase windows must be $__rate_interval
}

// checkExpr parses expr and returns the metric names it uses and every problem found.
func checkExpr(expr string, opts exprCheck) (names []string, problems []string) {
	parsed, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, []string{fmt.Sprintf("does not parse: %v\n%s", err, expr)}
	}
	parser.Inspect(parsed, func(node parser.Node, path []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			name := n.Name
			if name == "" {
				for _, m := range n.LabelMatchers {
					if m.Name == model.MetricNameLabel {
						name = m.Value
					}
				}
			}
			if name == "" {
				problems = append(problems, "selector without a metric name: "+n.String())
				return nil
			}
			names = append(names, name)
			if strings.HasSuffix(name, "_total") {
				// The parent must be a MatrixSelector whose parent is a counter function call.
				ok := false
				if len(path) >= 2 {
					if _, isMatrix := path[len(path)-1].(*parser.MatrixSelector); isMatrix {
						if call, isCall := path[len(path)-2].(*parser.Call); isCall && counterFuncs[call.Func.Name] {
							ok = true
						}
					}
				}
				if !ok && !counterAsEvent[name] && !presenceOnly(path) {
					problems = append(problems, fmt.Sprintf("counter %s outside rate/irate/increase/resets", name))
				}
			}
		case *parser.Call:
			if opts.requireRateInterval && (n.Func.Name == "rate" || n.Func.Name == "irate" || n.Func.Name == "increase") {
				for _, arg := range n.Args {
					if m, ok := arg.(*parser.MatrixSelector); ok && m.Range.String() != model.Duration(7777e9).String() {
						problems = append(problems, fmt.Sprintf("%s window is %s, not $__rate_interval: %s", n.Func.Name, m.Range, n))
					}
				}
			}
		}
		return nil
	})
	return names, problems
}

// grafanaVars makes a dashboard expression parseable: Grafana's interval variables become durations
// ($__rate_interval the sentinel), other variables a plain word (they only occur inside strings here).
func grafanaVars(expr string) string {
	r := strings.NewReplacer("$__rate_interval", rateSentinel, "${__rate_interval}", rateSentinel,
		"$__interval", "1m", "${__interval}", "1m", "$__range", "1h", "${__range}", "1h")
	expr = r.Replace(expr)
	return regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`).ReplaceAllString(expr, "var")
}

// ---- rules ----

// ruleGroups mirrors the Prometheus rule file format. rulefmt itself is not imported: it pulls in
// Kubernetes client packages whose pinned versions the module proxy here refuses; `promtool check
// rules` validates the files with rulefmt in make test-mixin.
type ruleGroups struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestLongRangesEvaluatedSlowly: a rule over a range of an hour or more ([6h], [1d]) sits in a
// group evaluated at most once a minute, whatever the global evaluation_interval is.
func TestLongRangesEvaluatedSlowly(t *testing.T) {
	rangeRe := regexp.MustCompile(`\[(\d+[smhdw])\]`)
	for _, file := range []string{"alerts/quota-rules.yaml", "alerts/quota-alerts.yaml"} {
		for _, g := range loadRules(t, file).Groups {
			for _, r := range g.Rules {
				for _, m := range rangeRe.FindAllStringSubmatch(r.Expr, -1) {
					d, err := model.ParseDuration(m[1])
					if err != nil || time.Duration(d) < time.Hour {
						continue
					}
					iv, err := model.ParseDuration(g.Interval)
					if g.Interval == "" || err != nil || time.Duration(iv) < time.Minute {
						t.Errorf("%s: %s%s uses [%s] in group %s with interval %q (want >= 1m)", file, r.Record, r.Alert, m[1], g.Name, g.Interval)
					}
				}
			}
		}
	}
}

func loadRules(t *testing.T, file string) ruleGroups {
	t.Helper()
	f, err := os.Open(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var groups ruleGroups
	if err := dec.Decode(&groups); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(groups.Groups) == 0 {
		t.Fatalf("%s: no rule groups", file)
	}
	return groups
}

func recordedNames(t *testing.T) map[string]bool {
	recorded := map[string]bool{}
	for _, g := range loadRules(t, "alerts/quota-rules.yaml").Groups {
		for _, r := range g.Rules {
			recorded[r.Record] = true
		}
	}
	return recorded
}

var levelMetricOps = regexp.MustCompile(`^[a-z_]+:[a-z0-9_]+:[a-z0-9_]+$`)

func TestRules(t *testing.T) {
	e := loadExposition(t)
	recorded := recordedNames(t)
	for _, g := range loadRules(t, "alerts/quota-rules.yaml").Groups {
		for _, r := range g.Rules {
			if r.Record == "" {
				t.Errorf("rules file holds a non-recording rule %q", r.Alert)
				continue
			}
			if !levelMetricOps.MatchString(r.Record) {
				t.Errorf("%s: not named level:metric:operations", r.Record)
			}
			names, problems := checkExpr(r.Expr, exprCheck{})
			for _, p := range problems {
				t.Errorf("%s: %s", r.Record, p)
			}
			for _, n := range names {
				if why := e.check(n, recorded); why != "" {
					t.Errorf("%s: %s", r.Record, why)
				}
			}
		}
	}
}

func runbookAnchors(t *testing.T) map[string]bool {
	b, err := os.ReadFile(filepath.Join(root, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			title := strings.TrimSpace(strings.TrimLeft(line, "#"))
			anchors[strings.ToLower(strings.ReplaceAll(title, " ", "-"))] = true
		}
	}
	return anchors
}

func TestAlerts(t *testing.T) {
	e := loadExposition(t)
	recorded := recordedNames(t)
	anchors := runbookAnchors(t)
	seen := map[string]bool{}
	for _, g := range loadRules(t, "alerts/quota-alerts.yaml").Groups {
		if len(g.Rules) > 20 {
			t.Errorf("group %s has %d rules (max 20)", g.Name, len(g.Rules))
		}
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("alerts file holds a recording rule %q", r.Record)
				continue
			}
			seen[r.Alert] = true
			if !strings.HasPrefix(r.Alert, "Quota") {
				t.Errorf("%s: alert names share the prefix Quota", r.Alert)
			}
			switch r.Labels["severity"] {
			case "critical", "warning", "info":
			default:
				t.Errorf("%s: severity %q", r.Alert, r.Labels["severity"])
			}
			summary := r.Annotations["summary"]
			if summary == "" || strings.Contains(summary, "{{") || !strings.HasSuffix(summary, ".") {
				t.Errorf("%s: summary must be static and end in a period: %q", r.Alert, summary)
			}
			// A description names the workload and its numbers; the fix is in the runbook it links.
			desc := r.Annotations["description"]
			if !strings.Contains(desc, "{{") || strings.Contains(desc, "Fix:") {
				t.Errorf("%s: description must be templated and leave the fix to the runbook: %q", r.Alert, desc)
			}
			url := r.Annotations["runbook_url"]
			anchor := url[strings.LastIndex(url, "#")+1:]
			if !strings.Contains(url, "docs/runbooks.md#") || !anchors[anchor] || anchor != strings.ToLower(r.Alert) {
				t.Errorf("%s: runbook_url %q has no matching section in docs/runbooks.md", r.Alert, url)
			}
			names, problems := checkExpr(r.Expr, exprCheck{})
			for _, p := range problems {
				t.Errorf("%s: %s", r.Alert, p)
			}
			// A description is the alert's value and labels, and at most the CPU limit that the
			// runtime alerts' cause is stated against: a template query (printf `...` | query)
			// runs at every evaluation of every firing alert.
			queries := regexp.MustCompile("`[^`]*`").FindAllString(desc, -1)
			if len(queries) > 1 {
				t.Errorf("%s: %d template queries in the description (max 1)", r.Alert, len(queries))
			}
			for _, q := range queries {
				if !strings.HasPrefix(q, "`cgroup:quota_cpu_limit_cores:binding{") {
					t.Errorf("%s: a template query other than the CPU limit in the description: %s", r.Alert, q)
				}
				names = append(names, "cgroup:quota_cpu_limit_cores:binding")
			}
			for _, n := range names {
				if why := e.check(n, recorded); why != "" {
					t.Errorf("%s: %s", r.Alert, why)
				}
			}
		}
	}
	for _, want := range []string{
		"QuotaCPUThrottlingDuringWarmup", "QuotaCPUStalls", "QuotaJVMGCThreadsExceedCPULimit",
		"QuotaGoMaxProcsExceedsCPULimit", "QuotaJVMSafepointInflation", "QuotaMemoryCreep",
		"QuotaMallocArenaBloat", "QuotaMemoryNearLimit", "QuotaContainerOOMKilled",
		"QuotaHighSystemCPUUnderQuota", "QuotaExporterDown", "QuotaExporterMissing",
		"QuotaExporterCollectorFailed",
		"QuotaGoSTWInflation",
	} {
		if !seen[want] {
			t.Errorf("alert %s is missing", want)
		}
	}
}

// TestAlertReadability holds the rendered alerts to readability budgets: kubernetes-mixin's
// alerts (median expression 163 characters, recording-rule chains at most 2 deep, descriptions of
// a sentence) read in a review. go run ./mixin/cmd/alertfigures -root .. prints the figures.
func TestAlertReadability(t *testing.T) {
	f, err := figures.Measure(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", f)
	if f.MedianExprChars > 200 || f.LongestExprChars > 600 {
		t.Errorf("alert expressions: median %d, longest %d characters (%s); max 200 and 600",
			f.MedianExprChars, f.LongestExprChars, f.LongestExprCharsAlert)
	}
	if f.LongestExprLines > 15 {
		t.Errorf("%s: expression of %d lines (max 15)", f.LongestExprAlert, f.LongestExprLines)
	}
	if f.DeepestChain > 3 {
		t.Errorf("%s: a chain of %d recording rules (max 3)", f.DeepestChainRule, f.DeepestChain)
	}
	// Templates: the workload phrase (container of pod, pod, or cgroup, and the node) is 170 of
	// them, the CPU limit's query 230 more in the runtime alerts. What a reader gets is shorter.
	if f.MedianDescription > 300 || f.LongestDescription > 560 {
		t.Errorf("description templates: median %d, longest %d characters (%s); max 300 and 560",
			f.MedianDescription, f.LongestDescription, f.LongestDescAlert)
	}
	if f.MedianRendered > 160 || f.LongestRendered > 200 {
		t.Errorf("descriptions as rendered in the promtool tests: median %d, longest %d characters; max 160 and 200",
			f.MedianRendered, f.LongestRendered)
	}
	// The CPU limit in the two runtime alerts (each at two severities) only.
	if f.SubQueries > 4 {
		t.Errorf("%d template queries in the annotations (%v); max 4", f.SubQueries, f.SubQueriesByAlert)
	}
}

// TestRunbookSections: every alert's runbook section says what it means, what it costs, where
// to look and how to fix it (kubernetes-mixin's runbooks), since the descriptions leave all of it
// to the runbook.
func TestRunbookSections(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, sec := range strings.Split(string(b), "\n## ")[1:] {
		title, body, _ := strings.Cut(sec, "\n")
		sections[strings.TrimSpace(title)] = body
	}
	for _, g := range loadRules(t, "alerts/quota-alerts.yaml").Groups {
		for _, r := range g.Rules {
			body, ok := sections[r.Alert]
			if !ok {
				t.Errorf("%s: no section in docs/runbooks.md", r.Alert)
				continue
			}
			for _, part := range []string{"**Meaning.**", "**Impact.**", "**Diagnosis.**", "**Mitigation.**"} {
				if !strings.Contains(body, part) {
					t.Errorf("%s: its runbook section has no %s", r.Alert, part)
				}
			}
		}
	}
}

// TestAlertUnitTests makes sure the promtool unit tests cover every alert, firing and not firing.
func TestAlertUnitTests(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "quota-exporter-mixin", "tests", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yamlToJSON(b, &suite); err != nil {
		t.Fatal(err)
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range suite.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				firing[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, g := range loadRules(t, "alerts/quota-alerts.yaml").Groups {
		for _, r := range g.Rules {
			if !firing[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: promtool tests need a firing (%v) and a not-firing (%v) case", r.Alert, firing[r.Alert], quiet[r.Alert])
			}
		}
	}
}

// ---- dashboards ----

type panelJSON struct {
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Datasource  json.RawMessage `json:"datasource"`
	FieldConfig json.RawMessage `json:"fieldConfig"`
	Targets     []struct {
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []panelJSON `json:"panels"`
}

type dashboardJSON struct {
	UID        string      `json:"uid"`
	Title      string      `json:"title"`
	Editable   bool        `json:"editable"`
	Panels     []panelJSON `json:"panels"`
	Templating struct {
		List []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Name       string                `json:"name"`
			Target     struct{ Expr string } `json:"target"`
			Datasource json.RawMessage       `json:"datasource"`
		} `json:"list"`
	} `json:"annotations"`
}

func dashboardFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards/*.json (%v)", err)
	}
	sort.Strings(files)
	return files
}

// TestDashboardsGrafanaTypes decodes every dashboard into grafana-foundation-sdk's types with
// unknown fields rejected. The SDK decodes a panel's fieldConfig loosely (only fieldConfig.defaults.custom
// strictly, through the panel plugin), so fieldConfig is decoded strictly on its own as well.
func TestDashboardsGrafanaTypes(t *testing.T) {
	for _, f := range dashboardFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard.Dashboard
		if err := d.UnmarshalJSONStrict(b); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
		var raw dashboardJSON
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		for _, p := range flatten(raw.Panels) {
			if p.Type == "row" || len(p.FieldConfig) == 0 {
				continue
			}
			var fc struct {
				Defaults  map[string]json.RawMessage `json:"defaults"`
				Overrides json.RawMessage            `json:"overrides"`
			}
			if err := json.Unmarshal(p.FieldConfig, &fc); err != nil {
				t.Fatal(err)
			}
			delete(fc.Defaults, "custom") // checked by the panel plugin above
			// The SDK types data links as dashboard links (type, icon, tags: fields Grafana's
			// DataLink does not have); they are decoded strictly as Grafana's DataLink instead.
			if links, ok := fc.Defaults["links"]; ok {
				var dl []struct {
					Title       string `json:"title"`
					URL         string `json:"url"`
					TargetBlank bool   `json:"targetBlank"`
				}
				dec := json.NewDecoder(bytes.NewReader(links))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&dl); err != nil {
					t.Errorf("%s: panel %q data links: %v", filepath.Base(f), p.Title, err)
				}
				for _, l := range dl {
					if l.Title == "" || l.URL == "" {
						t.Errorf("%s: panel %q: data link without a title or url", filepath.Base(f), p.Title)
					}
				}
				delete(fc.Defaults, "links")
			}
			stripped, _ := json.Marshal(map[string]any{"defaults": fc.Defaults, "overrides": fc.Overrides})
			var src dashboard.FieldConfigSource
			if err := src.UnmarshalJSONStrict(stripped); err != nil {
				t.Errorf("%s: panel %q fieldConfig: %v", filepath.Base(f), p.Title, err)
			}
		}
	}
}

func flatten(panels []panelJSON) []panelJSON {
	var out []panelJSON
	for _, p := range panels {
		out = append(out, p)
		out = append(out, flatten(p.Panels)...)
	}
	return out
}

const datasourceVar = "${datasource}"

func checkDatasource(raw json.RawMessage) string {
	var ref struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	if len(raw) == 0 {
		return "no datasource"
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		return fmt.Sprintf("datasource %s is not a reference", raw)
	}
	if ref.UID != datasourceVar || ref.Type != "prometheus" {
		return fmt.Sprintf("datasource %s: want {type: prometheus, uid: %s}", raw, datasourceVar)
	}
	return ""
}

var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)

func TestDashboards(t *testing.T) {
	e := loadExposition(t)
	recorded := recordedNames(t)
	uids := map[string]string{}
	for _, f := range dashboardFiles(t) {
		name := filepath.Base(f)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboardJSON
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d.UID == "" || len(d.UID) > 40 {
			t.Errorf("%s: uid %q", name, d.UID)
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s share uid %s", name, other, d.UID)
		}
		uids[d.UID] = name
		if d.Editable {
			t.Errorf("%s: editable", name)
		}

		var exprs []struct{ where, expr string }
		vars := map[string]string{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v.Type
			if q, ok := v.Query.(string); ok && v.Type == "query" {
				m := labelValues.FindStringSubmatch(q)
				if m == nil {
					t.Errorf("%s: variable %s: query %q is not label_values(selector, label)", name, v.Name, q)
					continue
				}
				exprs = append(exprs, struct{ where, expr string }{"variable " + v.Name, m[1]})
			}
		}
		if vars["datasource"] != "datasource" {
			t.Errorf("%s: no datasource variable", name)
		}
		for _, want := range []string{"job", "instance", "cgroup", "pod", "container"} {
			if vars[want] != "query" {
				t.Errorf("%s: no %s variable", name, want)
			}
		}
		for _, a := range d.Annotations.List {
			if why := checkDatasource(a.Datasource); why != "" {
				t.Errorf("%s: annotation %q: %s", name, a.Name, why)
			}
			exprs = append(exprs, struct{ where, expr string }{"annotation " + a.Name, a.Target.Expr})
		}
		for _, p := range flatten(d.Panels) {
			if p.Type == "row" {
				continue
			}
			var fc struct {
				Defaults struct {
					Unit string `json:"unit"`
				} `json:"defaults"`
			}
			_ = json.Unmarshal(p.FieldConfig, &fc)
			if fc.Defaults.Unit == "" {
				t.Errorf("%s: panel %q has no unit", name, p.Title)
			}
			if strings.TrimSpace(p.Description) == "" {
				t.Errorf("%s: panel %q has no description", name, p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no targets", name, p.Title)
			}
			if why := checkDatasource(p.Datasource); why != "" {
				t.Errorf("%s: panel %q: %s", name, p.Title, why)
			}
			for _, tg := range p.Targets {
				if why := checkDatasource(tg.Datasource); why != "" {
					t.Errorf("%s: panel %q target: %s", name, p.Title, why)
				}
				exprs = append(exprs, struct{ where, expr string }{"panel " + p.Title, tg.Expr})
			}
		}
		for _, x := range exprs {
			names, problems := checkExpr(grafanaVars(x.expr), exprCheck{requireRateInterval: true})
			for _, p := range problems {
				t.Errorf("%s: %s: %s", name, x.where, p)
			}
			for _, n := range names {
				if why := e.check(n, recorded); why != "" {
					t.Errorf("%s: %s: %s", name, x.where, why)
				}
			}
		}
		// No datasource uid other than the variable anywhere in the file.
		for _, m := range regexp.MustCompile(`"uid":\s*"([^"]*)"`).FindAllStringSubmatch(string(b), -1) {
			if m[1] != datasourceVar && m[1] != d.UID {
				t.Errorf("%s: hard-coded uid %q", name, m[1])
			}
		}
	}
}
