package mixin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/prometheus/promql/parser"
)

// drillDowns names, per dashboard, the panels whose rows or series open other dashboards on the
// clicked workload, and which.
var drillDowns = map[string]map[string][]string{
	"quota-overview.json": {
		"Containers and pods":                                      {"quota-cpu-throttling", "quota-runtime-pauses", "quota-memory"},
		"Top 10 frozen containers and pods":                        {"quota-cpu-throttling"},
		"Top 10 containers and pods by working set / memory limit": {"quota-memory"},
	},
	"quota-cpu-throttling.json": {"Throttled share of CFS periods": {"quota-runtime-pauses", "quota-memory"}},
	"quota-runtime-pauses.json": {
		"Runtime threads per core of limit": {"quota-cpu-throttling"},
		"Throttled share of CFS periods":    {"quota-cpu-throttling", "quota-memory"},
	},
	"quota-memory.json": {"Working set / memory limit": {"quota-cpu-throttling", "quota-runtime-pauses"}},
}

var (
	linkVar   = regexp.MustCompile(`[?&]var-([A-Za-z_]+)=([^&]*)`)
	linkField = regexp.MustCompile(`^\$\{__(?:field\.labels|data\.fields)\.([A-Za-z_]+)\}$`)
)

// TestDashboardLinks: every dashboard links to the other three (Grafana's DashboardLink type,
// keeping time range and variables), and the drill-down data links open another dashboard of
// the mixin with variables it has, filled from labels the panel's queries keep.
func TestDashboardLinks(t *testing.T) {
	type info struct {
		file string
		vars map[string]bool
	}
	byUID := map[string]info{}
	parsed := map[string]dashboardJSON{}
	sdk := map[string]dashboard.Dashboard{}
	for _, f := range dashboardFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboardJSON
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		var s dashboard.Dashboard
		if err := s.UnmarshalJSONStrict(b); err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
		}
		byUID[d.UID] = info{filepath.Base(f), vars}
		parsed[filepath.Base(f)] = d
		sdk[filepath.Base(f)] = s
	}
	for name, s := range sdk {
		self := parsed[name].UID
		linked := map[string]bool{}
		for _, l := range s.Links {
			if l.Type != dashboard.DashboardLinkTypeLink || l.Url == nil || !l.IncludeVars || !l.KeepTime {
				t.Errorf("%s: link %q: want type link with a url, includeVars and keepTime", name, l.Title)
				continue
			}
			uid := strings.TrimPrefix(*l.Url, "/d/")
			if _, ok := byUID[uid]; !ok || uid == self {
				t.Errorf("%s: link %q to %s: not another dashboard of the mixin", name, l.Title, *l.Url)
			}
			linked[uid] = true
		}
		if len(linked) != len(byUID)-1 {
			t.Errorf("%s links to %d of the other %d dashboards", name, len(linked), len(byUID)-1)
		}
	}

	for name, d := range parsed {
		want := drillDowns[name]
		seen := map[string]bool{}
		for _, p := range flatten(d.Panels) {
			var fc struct {
				Defaults struct {
					Links []struct {
						Title string `json:"title"`
						URL   string `json:"url"`
					} `json:"links"`
				} `json:"defaults"`
			}
			_ = json.Unmarshal(p.FieldConfig, &fc)
			if len(fc.Defaults.Links) == 0 {
				continue
			}
			seen[p.Title] = true
			var targets []string
			for _, l := range fc.Defaults.Links {
				path, query, _ := strings.Cut(l.URL, "?")
				uid := strings.TrimPrefix(path, "/d/")
				target, ok := byUID[uid]
				if !ok || uid == d.UID {
					t.Errorf("%s: panel %q: data link %q opens %s, not another dashboard of the mixin", name, p.Title, l.Title, path)
					continue
				}
				targets = append(targets, uid)
				if !strings.Contains(query, "${__url_time_range}") || !strings.Contains(query, "${datasource:queryparam}") {
					t.Errorf("%s: panel %q: data link %q loses the time range or the datasource", name, p.Title, l.Title)
				}
				for _, m := range linkVar.FindAllStringSubmatch("?"+query, -1) {
					if !target.vars[m[1]] {
						t.Errorf("%s: panel %q: data link sets var-%s, which %s does not have", name, p.Title, m[1], target.file)
					}
					f := linkField.FindStringSubmatch(m[2])
					if f == nil {
						t.Errorf("%s: panel %q: var-%s=%s is not a field or label of the clicked row or series", name, p.Title, m[1], m[2])
						continue
					}
					for _, tg := range p.Targets {
						if !keepsLabel(t, grafanaVars(tg.Expr), f[1]) {
							t.Errorf("%s: panel %q: a query drops the label %s that its data link passes on: %s", name, p.Title, f[1], tg.Expr)
						}
					}
				}
			}
			if strings.Join(targets, ",") != strings.Join(want[p.Title], ",") {
				t.Errorf("%s: panel %q drills down to %v, want %v", name, p.Title, targets, want[p.Title])
			}
		}
		for title := range want {
			if !seen[title] {
				t.Errorf("%s: panel %q has no drill-down links", name, title)
			}
		}
	}
}

// keepsLabel reports whether the series expr returns carry label: the outermost aggregation
// groups by it (topk and friends keep every label), the left side of a binary operation keeps it,
// or expr selects series that have it.
func keepsLabel(t *testing.T, expr, label string) bool {
	t.Helper()
	e, err := promql.ParseExpr(expr)
	if err != nil {
		t.Errorf("%v: %s", err, expr)
		return false
	}
	for {
		switch n := e.(type) {
		case *parser.ParenExpr:
			e = n.Expr
		case *parser.StepInvariantExpr:
			e = n.Expr
		case *parser.Call:
			if n.Func.Name != "label_replace" && n.Func.Name != "label_join" {
				return true
			}
			e = n.Args[0]
		case *parser.AggregateExpr:
			switch n.Op {
			case parser.TOPK, parser.BOTTOMK, parser.LIMITK:
				e = n.Expr
				continue
			}
			for _, g := range n.Grouping {
				if g == label {
					return !n.Without
				}
			}
			return n.Without
		case *parser.BinaryExpr:
			if n.VectorMatching != nil && n.VectorMatching.On && n.VectorMatching.Card == parser.CardOneToOne {
				for _, l := range n.VectorMatching.MatchingLabels {
					if l == label {
						return true
					}
				}
				return false
			}
			e = n.LHS
		default:
			return true
		}
	}
}
