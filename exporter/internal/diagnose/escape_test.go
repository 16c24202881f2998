package diagnose

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// hostileName is what a tenant can put in a process, container or cgroup name: terminal
// escapes (clear screen, window title, OSC 8 hyperlink), BEL, CR/LF that forge lines,
// Markdown links, images, HTML, emphasis, table cells and backticks that close code spans.
const hostileName = "\x1b[2J\x1b]0;pwned\x07\x1b]8;;http://evil\x1b\\x\r\n# Fixed!\n[click](http://evil) ![i](http://evil/p.png) <script>x</script> *b* | cell ` code``"

// hostileReport is the golden host's report with every name a tenant controls replaced.
func hostileReport(t *testing.T) Report {
	ws := loadWorkloads(t, filepath.Join("testdata", "workloads.json"), 15*time.Second)
	for i := range ws {
		w := &ws[i]
		w.Cgroup = "/kubepods/" + hostileName
		if w.Pod != "" {
			w.Namespace, w.Pod, w.Container = hostileName, hostileName, hostileName
		}
		if w.BindingCgroup != "" && w.BindingCgroup != w.Cgroup {
			// An ancestor's name reaches the fix ("raise the CPU limit (set on ...)").
			w.BindingCgroup = "/kubepods/ancestor " + hostileName
		} else if w.BindingCgroup != "" {
			w.BindingCgroup = w.Cgroup
		}
		for j := range w.Processes {
			w.Processes[j].Name = hostileName
			if g := w.Processes[j].Go; g != nil {
				g.Version = hostileName
			}
		}
	}
	r := NewReport("history", 15*time.Second, ws, true, time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC))
	r.Notes = []string{hostileName}
	// A tenant over the exporter's budgets is named by the name it chose.
	r.AddFindings(BudgetFindings([]Overrun{
		{Budget: "cgroups", Reason: "tenant", Tenant: "/" + hostileName, Name: "/" + hostileName, Kept: 32, Skipped: 1968, PerTenant: 32, Node: 5000},
		{Budget: "stuck_reads", Reason: "tenant", Tenant: hostileName, Name: hostileName + "/" + hostileName, Kept: 8, PerTenant: 8, Node: 128},
	})...)
	if len(r.Findings) == 0 {
		t.Fatal("no findings to print")
	}
	return r
}

// ownEscape is the only escape sequence the colour report writes: SGR colours.
var ownEscape = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// TestTextEscapesNames: in the plain and the colour report no escape sequence, BEL or
// carriage return of a tenant's reaches the terminal, and no name adds a line.
func TestTextEscapesNames(t *testing.T) {
	r := hostileReport(t)
	var clean bytes.Buffer
	if err := WriteText(&clean, r, Style{}); err != nil {
		t.Fatal(err)
	}
	for _, color := range []bool{false, true} {
		var b bytes.Buffer
		if err := WriteText(&b, r, Style{Color: color}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if color {
			out = ownEscape.ReplaceAllString(out, "")
		}
		if strings.ContainsAny(out, "\x1b\x07\r") {
			t.Errorf("color=%v: a control character reached the output:\n%q", color, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "# Fixed!") {
				t.Errorf("color=%v: a name forged the line %q", color, l)
			}
		}
		if !strings.Contains(out, "\uFFFD") || !strings.Contains(out, "pwned") {
			t.Errorf("color=%v: the names are not shown (replaced, not dropped)", color)
		}
	}
}

// markdownLink, markdownHTML: what Markdown would turn into a link, an image or HTML.
var (
	markdownLink = regexp.MustCompile(`(^|[^\\])\]\(`)
	markdownHTML = regexp.MustCompile(`(^|[^\\])<[a-z/]`)
)

// TestMarkdownEscapesNames: names in the Markdown report cannot open links, images or HTML,
// close their code span, split a table cell or start a heading.
func TestMarkdownEscapesNames(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, hostileReport(t)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "# Fixed") {
			t.Errorf("a name forged the line %q", l)
		}
		if text := stripCodeSpans(l); markdownLink.MatchString(text) || markdownHTML.MatchString(text) {
			t.Errorf("unescaped link or HTML in %q", l)
		}
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| ---") && !strings.HasPrefix(l, "| state") {
			// Cells: state, workload, summary; every other | is escaped.
			if n := len(regexp.MustCompile(`(^|[^\\])\|`).FindAllString(l, -1)); n != 4 {
				t.Errorf("table row with %d cell separators: %q", n, l)
			}
			// The workload's code span: a fence longer than any run of backticks inside.
			cell := strings.Split(l, " | ")[1]
			fence := cell[:strings.IndexFunc(cell, func(r rune) bool { return r != '`' })]
			if len(fence) < 3 || !strings.HasSuffix(cell, fence) || strings.Contains(strings.Trim(cell, "`"), fence) {
				t.Errorf("workload cell %q: its code span can be closed early", cell)
			}
		}
	}
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Errorf("a control character reached the Markdown:\n%q", out)
	}
}

// stripCodeSpans drops the code spans of a line (CommonMark: a run of n backticks up to the
// next run of exactly n), inside which nothing is Markdown.
func stripCodeSpans(l string) string {
	var out strings.Builder
	for i := 0; i < len(l); {
		if l[i] != '`' || (i > 0 && l[i-1] == '\\') {
			out.WriteByte(l[i])
			i++
			continue
		}
		n := 0
		for i+n < len(l) && l[i+n] == '`' {
			n++
		}
		end := -1
		for j := i + n; j < len(l); {
			if l[j] != '`' {
				j++
				continue
			}
			m := 0
			for j+m < len(l) && l[j+m] == '`' {
				m++
			}
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 { // no closing run: literal backticks
			out.WriteString(l[i : i+n])
			i += n
			continue
		}
		i = end
	}
	return out.String()
}
