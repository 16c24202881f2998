// Package figures measures how readable the rendered alerts are (issue 24): the longest alert
// expression, the descriptions' lengths and the template sub-queries they run at every
// evaluation of a firing alert.
package figures

import (
	"fmt"
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
	MedianDescription  int // characters of the description template
	LongestDescription int
	LongestDescAlert   string
	SubQueries         int            // `query` calls in annotations, all alerts
	SubQueriesByAlert  map[string]int // per rule (an alert name with two severities sums both)
	RenderedLines      int            // lines of alerts/*.yaml
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

// Measure reads root/alerts/quota-alerts.yaml (expressions, descriptions, sub-queries) and
// counts the lines of every root/alerts/*.yaml.
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
	b, err := os.ReadFile(filepath.Join(root, "alerts", "quota-alerts.yaml"))
	if err != nil {
		return f, err
	}
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
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
	sort.Ints(lengths)
	if n := len(lengths); n > 0 {
		f.MedianDescription = lengths[n/2]
		if n%2 == 0 {
			f.MedianDescription = (lengths[n/2-1] + lengths[n/2]) / 2
		}
	}
	return f, nil
}

// String is the report's table.
func (f Figures) String() string {
	return fmt.Sprintf("alert rules: %d\nlongest alert expression: %d lines (%s)\n"+
		"description length: median %d, longest %d characters (%s)\n"+
		"template sub-queries in annotations: %d\nrendered lines of alerts/*.yaml: %d\n",
		f.Alerts, f.LongestExprLines, f.LongestExprAlert, f.MedianDescription, f.LongestDescription,
		f.LongestDescAlert, f.SubQueries, f.RenderedLines)
}
