// Package tenantstr is the one rule for strings that tenants control (process and executable
// names, Go versions, JVM properties, cgroup names) wherever the exporter shows them: as label
// values, on a terminal, in Markdown. A tenant chooses these bytes; they must not be able to
// bloat a series, forge a line of a notification or drive the terminal of whoever reads them.
package tenantstr

import (
	"fmt"
	"hash/crc32"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// MaxLabel caps a label value in bytes. Longer values keep their first bytes (on a rune
// boundary), then "…" and 8 hex digits of a hash of the whole value, so two long values
// that share a prefix stay two series.
const MaxLabel = 256

// castagnoli: CRC-32C, computed by the CPU (SSE4.2) at gigabytes a second; stable across
// restarts, so a capped label does not churn.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Replacement stands for every invalid UTF-8 byte sequence and every control or
// bidirectional-formatting character.
const Replacement = "\uFFFD"

// Rule is the rule in words, for docs/metrics.md.
const Rule = "every byte of invalid UTF-8 and every control character (C0, DEL, C1, Unicode format characters such as bidirectional overrides) are replaced by U+FFFD, and a value longer than 256 bytes keeps its first bytes, then `…` and 8 hex digits of the CRC-32C of the whole value (distinct long values stay distinct)"

// Label returns s cleaned by the rule. Plain short values (the usual case) are returned as
// they are, without allocating.
func Label(s string) string {
	if plain(s) && len(s) <= MaxLabel {
		return s
	}
	// Bytes beyond 4*MaxLabel are cut anyway: not copied (the hash below still sees all of s).
	c := replaceUnsafe(s, 4*MaxLabel)
	if len(c) <= MaxLabel {
		return c
	}
	suffix := fmt.Sprintf("…%08x", crc32.Checksum(unsafe.Slice(unsafe.StringData(s), len(s)), castagnoli)) // crc32 only reads: no copy of a 64 KiB value
	cut := MaxLabel - len(suffix)
	for cut > 0 && !utf8.RuneStart(c[cut]) {
		cut--
	}
	return c[:cut] + suffix
}

// Keep returns s under the label rule (Label) as a string of its own: what the exporter keeps
// of a tenant's string across scrapes. A substring would pin the whole text it was cut from
// (a module line pins the whole build info), and Label returns short plain values as they
// are.
func Keep(s string) string { return strings.Clone(Label(s)) }

// plain: printable ASCII only.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// unsafeRune: what a terminal, a log line or a notification may interpret.
func unsafeRune(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// replaceUnsafe replaces every unsafe rune of s, stopping once the result exceeds stop
// bytes (0: never).
func replaceUnsafe(s string, stop int) string {
	var b strings.Builder
	b.Grow(min(len(s), 4*MaxLabel))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r) {
			b.WriteString(Replacement)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
		if stop > 0 && b.Len() > stop {
			break
		}
	}
	return b.String()
}

// Text returns s for a terminal or a plain-text report: invalid UTF-8 and control characters
// replaced as in Label (no escape sequence, carriage return or newline of a tenant reaches the
// reader's terminal), but no length cap: reports also print the exporter's own long texts.
func Text(s string) string {
	if plain(s) {
		return s
	}
	return replaceUnsafe(s, 0)
}

// markdownSpecial are the characters that can open Markdown or HTML syntax inside a line or a
// table cell (links, images, HTML, emphasis, code, cells, strikethrough): backslash-escaped,
// as CommonMark allows for any ASCII punctuation. Values never start a line in the reports,
// so line-start syntax (#, -, 1.) needs nothing.
const markdownSpecial = "\\`*_[]<>|~"

// Markdown returns s for running Markdown text: Text, then markdownSpecial escaped.
func Markdown(s string) string {
	s = Text(s)
	if !strings.ContainsAny(s, markdownSpecial) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r < utf8.RuneSelf && strings.ContainsRune(markdownSpecial, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// MarkdownCode returns s as a Markdown code span that s cannot close: fenced by one backtick
// more than its longest run of backticks, padded when it starts or ends with one, and with
// "|" escaped (GitHub tables split cells on it even inside code spans).
func MarkdownCode(s string) string {
	s = strings.ReplaceAll(Text(s), "|", "\\|")
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// Unique returns the label of each of raws (Label), made unique among them: distinct raw
// values get distinct labels, so that two names differing only in what cleaning replaces or
// cuts (a control character, bytes past the cap) are two series, not one duplicated. A
// value keeps its label when no other value's label is the same, or when it is that label
// itself (a plain value); the others sharing a label get " #2", " #3", ... in the byte
// order of their raw values, the label cut to leave room (Label's rule). Equal raw values
// get equal labels. It allocates nothing when every value is plain and short, the usual case.
func Unique(raws []string) []string {
	out := make([]string, len(raws))
	changed := false
	for i, r := range raws {
		out[i] = Label(r)
		changed = changed || out[i] != r
	}
	if !changed { // distinct plain values are distinct labels
		return out
	}
	// Group the raw values by label; only labels that a changed value has can be shared.
	byLabel := map[string][]string{}
	for i, r := range raws {
		byLabel[out[i]] = append(byLabel[out[i]], r)
	}
	taken := make(map[string]bool, len(raws))
	for _, l := range out {
		taken[l] = true
	}
	labels := make([]string, 0, len(byLabel))
	for l := range byLabel {
		labels = append(labels, l)
	}
	sort.Strings(labels) // the same ordinals every time
	renamed := map[string]string{}
	for _, label := range labels {
		rs := dedupe(byLabel[label])
		if len(rs) < 2 {
			continue
		}
		// The plain value (raw == label), if any, keeps the label; the others, in byte order,
		// get the next free ordinal.
		sort.Slice(rs, func(i, j int) bool {
			if (rs[i] == label) != (rs[j] == label) {
				return rs[i] == label
			}
			return rs[i] < rs[j]
		})
		n := 1
		for _, r := range rs[1:] {
			for {
				n++
				suffix := " #" + strconv.Itoa(n)
				cand := cut(label, MaxLabel-len(suffix)) + suffix
				if !taken[cand] {
					taken[cand] = true
					renamed[r] = cand
					break
				}
			}
		}
	}
	for i, r := range raws {
		if l, ok := renamed[r]; ok {
			out[i] = l
		}
	}
	return out
}

// dedupe drops repeated values of a small list.
func dedupe(rs []string) []string {
	if len(rs) < 2 {
		return rs
	}
	seen := make(map[string]bool, len(rs))
	out := rs[:0:0]
	for _, r := range rs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// cut shortens s to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
