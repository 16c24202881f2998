// Package figures measures how readable the rendered alerts are (issue 24): the longest alert
// expression, the descriptions' lengths and the template sub-queries they run at every
// evaluation of a firing alert.
package figures

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Figures of alerts/*.yaml.
type Figures struct {
	Alerts             int
	LongestExprLines   int
	LongestExprAlert   string
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
	var lengths []int
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			f.Alerts++
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
	return fmt.Sprintf("alert rules: %d\nlongest alert expression: %d lines (%s)\n"+
		"description length: median %d, longest %d characters (%s)\n"+
		"descriptions as the promtool tests expect them rendered: median %d, longest %d characters\n"+
		"template sub-queries in annotations: %d\nrendered lines of alerts/*.yaml: %d\n",
		f.Alerts, f.LongestExprLines, f.LongestExprAlert, f.MedianDescription, f.LongestDescription,
		f.LongestDescAlert, f.MedianRendered, f.LongestRendered, f.SubQueries, f.RenderedLines)
}
