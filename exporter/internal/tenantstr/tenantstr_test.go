package tenantstr

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

func isClean(s string) bool {
	return utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) < 0
}

func TestLabel(t *testing.T) {
	for in, want := range map[string]string{
		"java":                            "java",
		"go1.26.8":                        "go1.26.8",
		"QuotaBusy (java) #2":             "QuotaBusy (java) #2",
		"Ünïcödé 名前":                      "Ünïcödé 名前",
		"\x1b[2Jclear":                    "\uFFFD[2Jclear",
		"a\r\nb\tc\x00d\x7fe":             "a\uFFFD\uFFFDb\uFFFDc\uFFFDd\uFFFDe",
		"\u0085next line\u202eevil\u200b": "\uFFFDnext line\uFFFDevil\uFFFD",
		"bad\xff\xfeutf8":                 "bad\uFFFD\uFFFDutf8",
	} {
		if got := Label(in); got != want {
			t.Errorf("Label(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLabelLong: 64 KiB values are capped at MaxLabel on a rune boundary; distinct values
// with a common prefix stay distinct; the same value gives the same label.
func TestLabelLong(t *testing.T) {
	a := strings.Repeat("é\x1b", 32<<10)
	b := a[:len(a)-1] + "x"
	la, lb := Label(a), Label(b)
	for _, l := range []string{la, lb} {
		if len(l) > MaxLabel || !isClean(l) || !strings.Contains(l, "…") {
			t.Errorf("Label(64 KiB) = %q (%d bytes)", l, len(l))
		}
	}
	if la == lb || Label(a) != la {
		t.Errorf("labels of distinct long values: %q, %q", la, lb)
	}
	if s := strings.Repeat("x", MaxLabel); Label(s) != s {
		t.Errorf("a value of exactly MaxLabel bytes was changed")
	}
}

func TestTextKeepsLength(t *testing.T) {
	long := strings.Repeat("fix text ", 100)
	if Text(long) != long {
		t.Error("Text capped a long plain text")
	}
	if got := Text("a\x1b]0;t\x07b"); got != "a\uFFFD]0;t\uFFFDb" {
		t.Errorf("Text = %q", got)
	}
}

func TestMarkdown(t *testing.T) {
	for in, want := range map[string]string{
		"plain name":                 "plain name",
		"[click](http://evil) <img>": `\[click\](http://evil) \<img\>`,
		"a|b *c* _d_ `e` ~f~ \\":     `a\|b \*c\* \_d\_ \` + "`" + `e\` + "`" + ` \~f\~ \\`,
		"line\n# heading":            "line\uFFFD# heading",
	} {
		if got := Markdown(in); got != want {
			t.Errorf("Markdown(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"/kubepods/pod1": "`/kubepods/pod1`",
		"a`b":            "``a`b``",
		"`x``":           "``` `x`` ```",
		"a|b\n[x](y)":    "`a\\|b\uFFFD[x](y)`",
	} {
		if got := MarkdownCode(in); got != want {
			t.Errorf("MarkdownCode(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkLabel: the cost of the rule on a plain value (every label of every series) and a
// hostile one.
func BenchmarkLabel(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"plain", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/cri-containerd-abc.scope"},
		{"hostile-64KiB", strings.Repeat("\x1b[31mA", 64<<10/6)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Label(c.s)
			}
		})
	}
}

// A kept substring of a 1 MiB text keeps at most the label cap, not the text.
func TestKeepPinsNothing(t *testing.T) {
	text := strings.Repeat("a", 1<<20)
	var short, long string
	kept := testutil.Retained(func() any {
		short, long = Keep(text[:10]), Keep(text[:1<<19])
		return nil
	})
	if short != text[:10] || len(long) > MaxLabel || long != Label(text[:1<<19]) {
		t.Errorf("Keep: %q, %d bytes", short, len(long))
	}
	if kept > 4<<10 {
		t.Errorf("two kept strings keep %d bytes of the heap", kept)
	}
	runtime.KeepAlive(short)
	runtime.KeepAlive(long)
}

func TestUnique(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		in, want []string
	}{
		{[]string{"a", "b", "a"}, []string{"a", "b", "a"}},
		// Two names differing in a control character, and the name they both clean to.
		{[]string{"dup\x02", "dup\x01", "dup\uFFFD"}, []string{"dup\uFFFD #3", "dup\uFFFD #2", "dup\uFFFD"}},
		{[]string{"dup\x01", "dup\x02", "dup\x01"}, []string{"dup\uFFFD", "dup\uFFFD #2", "dup\uFFFD"}},
		// An ordinal a tenant took literally is skipped.
		{[]string{"n\x01", "n\x02", "n\uFFFD #2"}, []string{"n\uFFFD", "n\uFFFD #3", "n\uFFFD #2"}},
		{[]string{"plain"}, []string{"plain"}},
	} {
		got := Unique(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("Unique(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// Long values that share their first bytes and their hash suffix stay distinct and capped.
	a, b := Label(long+"a"), Label(long+"b")
	got := Unique([]string{long + "a", long + "b", a, b})
	seen := map[string]bool{}
	for _, l := range got {
		if seen[l] || len(l) > MaxLabel || !utf8.ValidString(l) {
			t.Errorf("Unique of long values: %q", got)
		}
		seen[l] = true
	}
}

// Distinct inputs always give distinct, clean labels, whatever a tenant crafts.
func FuzzUnique(f *testing.F) {
	f.Add("a\x01", "a\x02", "a\uFFFD")
	f.Add(strings.Repeat("y", 300)+"1", strings.Repeat("y", 300)+"2", "z")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		in := []string{a, b, c}
		got := Unique(in)
		for i := range in {
			if !isClean(got[i]) || len(got[i]) > MaxLabel {
				t.Fatalf("label %q of %q is not clean or too long", got[i], in[i])
			}
			for j := range in {
				if (in[i] == in[j]) != (got[i] == got[j]) {
					t.Fatalf("Unique(%q) = %q: distinct inputs share a label or equal ones differ", in, got)
				}
			}
		}
	})
}
