package series

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the series table in docs/diagnose.md")

const (
	docBegin = "<!-- series table: generated -->\n"
	docEnd   = "<!-- end of series table -->"
)

func renderTable() string {
	var b strings.Builder
	b.WriteString("| series | live | history | used for |\n| --- | --- | --- | --- |\n")
	mark := func(m Metric, mode Mode) string {
		if m.Modes&mode != 0 {
			return "yes"
		}
		return ""
	}
	for _, m := range Table {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.Name, mark(m, Live), mark(m, History), strings.ReplaceAll(m.Use, "|", `\|`))
	}
	return b.String()
}

// TestSeriesDoc keeps the table in docs/diagnose.md equal to Table.
func TestSeriesDoc(t *testing.T) {
	path := filepath.Join("..", "..", "..", "..", "docs", "diagnose.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: no %q … %q section", path, docBegin, docEnd)
	}
	want := doc[:i+len(docBegin)] + renderTable() + doc[j:]
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != want {
		t.Errorf("the series table in docs/diagnose.md is stale (go test ./exporter/internal/diagnose/series -run TestSeriesDoc -update)")
	}
}
