package diagnose

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// SchemaVersion is the version of the JSON report (docs/diagnose.schema.json). Bump it on
// any change that is not adding an optional field.
const SchemaVersion = 2

// Report is one run's result, in every output format.
type Report struct {
	SchemaVersion int       `json:"schema_version"`
	GeneratedAt   time.Time `json:"generated_at"`
	// Source is "live" (sampled on this host) or "history" (a Prometheus).
	Source      string  `json:"source"`
	SpanSeconds float64 `json:"span_seconds"`
	// Worst is the highest severity found, "none" without findings.
	Worst     string          `json:"worst"`
	Findings  []Finding       `json:"findings"`
	Workloads []WorkloadState `json:"workloads,omitempty"`
	// Notes are what limited the run (e.g. collectors that failed), never findings.
	Notes []string `json:"notes,omitempty"`
}

// WorkloadState is the one-line state of a watched workload (--all).
type WorkloadState struct {
	Cgroup   string `json:"cgroup"`
	Workload string `json:"workload"`
	State    string `json:"state"` // ok, warning, critical
	Summary  string `json:"summary"`
}

// NewReport diagnoses the workloads; all adds every workload's one-line state.
func NewReport(source string, span time.Duration, ws []Workload, all bool, now time.Time) Report {
	fs := Diagnose(ws)
	r := Report{SchemaVersion: SchemaVersion, GeneratedAt: now.UTC(), Source: source, SpanSeconds: math.Round(span.Seconds()*10) / 10, Worst: "none", Findings: fs}
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	if s := Worst(fs); s != "" {
		r.Worst = string(s)
	}
	if all {
		worst := map[string]Severity{}
		for _, f := range fs {
			if f.Severity.rank() > worst[f.Cgroup].rank() {
				worst[f.Cgroup] = f.Severity
			}
		}
		for i := range ws {
			w := &ws[i]
			st := "ok"
			if s := worst[w.Cgroup]; s != "" {
				st = string(s)
			}
			r.Workloads = append(r.Workloads, WorkloadState{Cgroup: w.Cgroup, Workload: w.Name(), State: st, Summary: summary(w)})
		}
		sort.Slice(r.Workloads, func(i, j int) bool { return r.Workloads[i].Workload < r.Workloads[j].Workload })
	}
	return r
}

// ExitCode is the process status for the report: 0 no findings, 1 warnings, 2 critical.
func (r Report) ExitCode() int {
	switch r.Worst {
	case string(Critical):
		return 2
	case string(Warning):
		return 1
	}
	return 0
}

func summary(w *Workload) string {
	var parts []string
	if w.LimitCores > 0 {
		parts = append(parts, "limit "+cores(w.LimitCores)+limitWhere(w))
	} else {
		parts = append(parts, "no CPU limit")
	}
	parts = append(parts, "usage "+cores(w.UsageCores))
	if w.Windows > 0 {
		parts = append(parts, fmt.Sprintf("throttled %d/%d s", w.ThrottledWindows, w.Windows))
	}
	var procs []string
	for _, p := range w.Processes {
		s := p.Name
		if p.Runtime != "" {
			s += " (" + p.Runtime + ")"
		}
		procs = append(procs, s)
	}
	if len(procs) > 0 {
		parts = append(parts, strings.Join(procs, ", "))
	}
	return strings.Join(parts, "; ")
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(out io.Writer, r Report) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Style colours the terminal report; the zero Style is plain text.
type Style struct{ Color bool }

func (s Style) wrap(code, text string) string {
	if !s.Color {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

func (s Style) severity(sev Severity) string {
	label := strings.ToUpper(string(sev))
	if sev == Critical {
		return s.wrap("1;31", label)
	}
	return s.wrap("1;33", label)
}

// WriteText writes the terminal report.
func WriteText(out io.Writer, r Report, st Style) error {
	var b strings.Builder
	if len(r.Findings) == 0 {
		fmt.Fprintf(&b, "No findings (%s, %s).\n", r.Source, spanText(r))
	} else {
		fmt.Fprintf(&b, "%d finding(s), worst %s (%s, %s)\n", len(r.Findings), r.Worst, r.Source, spanText(r))
	}
	// Every string is printed through tenantstr.Text: names come from tenants, and no escape
	// sequence or line break of theirs may reach the reader's terminal.
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "\n%s  %s\n", st.severity(f.Severity), st.wrap("1", tenantstr.Text(f.Title)))
		for _, fl := range findingFields(f) {
			fmt.Fprintf(&b, "  %-10s %s\n", strings.ToLower(fl.label)+":", tenantstr.Text(fl.value))
		}
		fmt.Fprintf(&b, "  fix:       %s\n", st.wrap("1;32", tenantstr.Text(f.Fix.Text)))
		for _, a := range f.Fix.Alternatives {
			fmt.Fprintf(&b, "             %s\n", tenantstr.Text(a))
		}
	}
	if len(r.Workloads) > 0 {
		fmt.Fprintf(&b, "\nWorkloads:\n")
		for _, w := range r.Workloads {
			state := w.State
			switch w.State {
			case string(Critical):
				state = st.wrap("31", state)
			case string(Warning):
				state = st.wrap("33", state)
			default:
				state = st.wrap("32", state)
			}
			fmt.Fprintf(&b, "  %-8s %s: %s\n", state, tenantstr.Text(w.Workload), tenantstr.Text(w.Summary))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nnote: %s\n", tenantstr.Text(n))
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// WriteMarkdown writes the report for a ticket.
func WriteMarkdown(out io.Writer, r Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## quota_exporter diagnose: %d finding(s), worst %s\n\n_%s, %s, %s_\n", len(r.Findings), r.Worst, r.Source, spanText(r), r.GeneratedAt.Format(time.RFC3339))
	for _, f := range r.Findings {
		// Names (workload, cgroup, process, versions and ancestors in evidence and mechanism)
		// come from tenants: code spans they cannot close, or escaped text. Fixes, the
		// exporter's own text with Markdown of its own (backticks), pass only tenantstr.Text.
		fmt.Fprintf(&b, "\n### %s: %s\n\n", strings.ToUpper(string(f.Severity)), tenantstr.Text(f.Title))
		for _, fl := range findingFields(f) {
			var v string
			if fl.label == "Workload" || fl.label == "Cgroup" {
				v = tenantstr.MarkdownCode(fl.value)
			} else {
				v = tenantstr.Markdown(fl.value)
			}
			fmt.Fprintf(&b, "- **%s:** %s\n", fl.label, v)
		}
		fmt.Fprintf(&b, "- **Fix:** %s\n", tenantstr.Text(f.Fix.Text))
		for _, a := range f.Fix.Alternatives {
			fmt.Fprintf(&b, "  - %s\n", tenantstr.Text(a))
		}
	}
	if len(r.Workloads) > 0 {
		fmt.Fprintf(&b, "\n| state | workload | summary |\n| --- | --- | --- |\n")
		for _, w := range r.Workloads {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", w.State, tenantstr.MarkdownCode(w.Workload), tenantstr.Markdown(w.Summary))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n> note: %s\n", tenantstr.Markdown(n))
	}
	_, err := io.WriteString(out, b.String())
	return err
}

func spanText(r Report) string {
	return fmt.Sprintf("%g s observed", r.SpanSeconds)
}

type field struct{ label, value string }

// findingFields are the lines every format shows before the fix.
func findingFields(f Finding) []field {
	fs := []field{{"Workload", f.Workload}}
	if f.Workload != f.Cgroup {
		fs = append(fs, field{"Cgroup", f.Cgroup})
	}
	if p := processText(f); p != "" {
		fs = append(fs, field{"Process", p})
	}
	return append(fs, field{"Evidence", evidenceText(f)}, field{"Mechanism", f.Mechanism})
}

func processText(f Finding) string {
	if f.Process == "" {
		return ""
	}
	s := f.Process
	var extra []string
	if f.Runtime != "" {
		extra = append(extra, f.Runtime)
	}
	if f.PID > 0 {
		extra = append(extra, fmt.Sprintf("pid %d", f.PID))
	}
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	return s
}

func evidenceText(f Finding) string {
	var ts []string
	for _, e := range f.Evidence {
		ts = append(ts, e.Text)
	}
	return strings.Join(ts, ", ")
}
