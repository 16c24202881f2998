// Package figures measures how readable the rendered rules are: the alert expressions' lengths,
// the deepest chain of recording rules, the descriptions' lengths and the template sub-queries
// they run at every evaluation of a firing alert.
package figures

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// Figures of alerts/*.yaml.
type Figures struct {
	Alerts           int
	LongestExprLines int
	LongestExprAlert string
	// Characters of the alert expressions as rendered (trailing newline cut), median and longest.
	MedianExprChars, LongestExprChars int
	LongestExprCharsAlert             string
	// DeepestChain: the most recording rules one alert's expression goes through (a rule over raw
	// series counts 1, a rule over it 2, ...); DeepestChainRule ends it.
	DeepestChain       int
	DeepestChainRule   string
	MedianDescription  int // characters of the description template (quota-alerts.yaml)
	LongestDescription int
	LongestDescAlert   string
	// The same for the texts the promtool tests expect (quota-exporter-mixin/tests/alerts_test.yaml):
	// what a receiver reads.
	MedianRendered, LongestRendered int
	SubQueries                      int            // `query` calls in annotations, all alerts
	SubQueriesByAlert               map[string]int // per rule (an alert name with two severities sums both)
	RenderedLines                   int            // lines of alerts/*.yaml
}

type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Record      string            `json:"record"`
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// Measure reads root/alerts/quota-alerts.yaml (expressions, descriptions, sub-queries), counts
// the lines of every root/alerts/*.yaml and reads the descriptions the promtool tests expect.
func Measure(root string) (Figures, error) {
	f := Figures{SubQueriesByAlert: map[string]int{}}
	files, err := filepath.Glob(filepath.Join(root, "alerts", "*.yaml"))
	if err != nil || len(files) == 0 {
		return f, fmt.Errorf("no alerts/*.yaml under %s (%v)", root, err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return f, err
		}
		f.RenderedLines += strings.Count(string(b), "\n")
	}
	var rf ruleFile
	if err := readYAML(filepath.Join(root, "alerts", "quota-alerts.yaml"), &rf); err != nil {
		return f, err
	}
	var recorded ruleFile
	if err := readYAML(filepath.Join(root, "alerts", "quota-rules.yaml"), &recorded); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	depth, err := chainDepths(recorded)
	if err != nil {
		return f, err
	}
	for rule, d := range depth {
		if d > f.DeepestChain || d == f.DeepestChain && rule < f.DeepestChainRule {
			f.DeepestChain, f.DeepestChainRule = d, rule
		}
	}
	var lengths, exprChars []int
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			f.Alerts++
			n := len([]rune(strings.TrimRight(r.Expr, "\n")))
			exprChars = append(exprChars, n)
			if n > f.LongestExprChars {
				f.LongestExprChars, f.LongestExprCharsAlert = n, r.Alert
			}
			if n := strings.Count(strings.TrimRight(r.Expr, "\n"), "\n") + 1; n > f.LongestExprLines {
				f.LongestExprLines, f.LongestExprAlert = n, r.Alert
			}
			d := len([]rune(r.Annotations["description"]))
			lengths = append(lengths, d)
			if d > f.LongestDescription {
				f.LongestDescription, f.LongestDescAlert = d, r.Alert
			}
			for _, a := range r.Annotations {
				n := strings.Count(a, "| query")
				f.SubQueries += n
				f.SubQueriesByAlert[r.Alert] += n
			}
		}
	}
	f.MedianDescription, f.LongestDescription = medianMax(lengths)
	f.MedianExprChars, f.LongestExprChars = medianMax(exprChars)
	// Older trees without the test file have no rendered figures.
	var tf testFile
	if err := readYAML(filepath.Join(root, "quota-exporter-mixin", "tests", "alerts_test.yaml"), &tf); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return f, err
	} else if err == nil {
		var rendered []int
		for _, tc := range tf.Tests {
			for _, a := range tc.AlertRuleTest {
				for _, e := range a.ExpAlerts {
					rendered = append(rendered, len([]rune(e.ExpAnnotations["description"])))
				}
			}
		}
		f.MedianRendered, f.LongestRendered = medianMax(rendered)
	}
	return f, nil
}

// chainDepths gives each recording rule its depth: 1 over raw series only, else one more than
// the deepest recording rule its expression reads.
func chainDepths(rf ruleFile) (map[string]int, error) {
	reads := map[string][]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record == "" {
				continue
			}
			e, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.Record, err)
			}
			parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
					reads[r.Record] = append(reads[r.Record], vs.Name)
				}
				return nil
			})
			if _, ok := reads[r.Record]; !ok {
				reads[r.Record] = nil
			}
		}
	}
	depth := map[string]int{}
	var visit func(name string, seen map[string]bool) int
	visit = func(name string, seen map[string]bool) int {
		if d, ok := depth[name]; ok {
			return d
		}
		if seen[name] {
			return 0 // a cycle; promtool rejects none, Prometheus evaluates it anyway
		}
		seen[name] = true
		d := 1
		for _, n := range reads[name] {
			if _, isRule := reads[n]; isRule && n != name {
				d = max(d, 1+visit(n, seen))
			}
		}
		depth[name] = d
		return d
	}
	for name := range reads {
		visit(name, map[string]bool{})
	}
	return depth, nil
}

func readYAML(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, v)
}

type testFile struct {
	Tests []struct {
		AlertRuleTest []struct {
			ExpAlerts []struct {
				ExpAnnotations map[string]string `json:"exp_annotations"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func medianMax(v []int) (median, longest int) {
	if len(v) == 0 {
		return 0, 0
	}
	sort.Ints(v)
	n := len(v)
	median = v[n/2]
	if n%2 == 0 {
		median = (v[n/2-1] + v[n/2]) / 2
	}
	return median, v[n-1]
}

// String is the report's table.
func (f Figures) String() string {
	return fmt.Sprintf("alert rules: %d\n"+
		"alert expression: median %d, longest %d characters (%s); longest %d lines (%s)\n"+
		"deepest recording-rule chain: %d (%s)\n"+
		"description length: median %d, longest %d characters (%s)\n"+
		"descriptions as the promtool tests expect them rendered: median %d, longest %d characters\n"+
		"template sub-queries in annotations: %d\nrendered lines of alerts/*.yaml: %d\n",
		f.Alerts, f.MedianExprChars, f.LongestExprChars, f.LongestExprCharsAlert, f.LongestExprLines, f.LongestExprAlert,
		f.DeepestChain, f.DeepestChainRule,
		f.MedianDescription, f.LongestDescription, f.LongestDescAlert,
		f.MedianRendered, f.LongestRendered, f.SubQueries, f.RenderedLines)
}
