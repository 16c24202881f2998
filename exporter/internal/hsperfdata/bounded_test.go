package hsperfdata

import (
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// maxParseAlloc bounds what one parse may allocate, and maxParseKept what a parsed layout
// keeps, whatever the file holds (MaxFileSize at most): MaxEntries entries at most, each
// with a name of at most MaxName bytes.
const (
	maxParseAlloc = 1 << 20
	maxParseKept  = 512 << 10
)

// A perf data file of 1 MiB holding 40 000 tiny entries: the walk kept every one (an Entry,
// its name and an index slot each: 3.4 MiB kept per JVM, killed at 70 JVMs in a 256 MiB
// limit); a layout now keeps MaxEntries at most, and ParseWanted only the wanted ones.
func TestParseBoundedOnCraftedFile(t *testing.T) {
	b := CraftedFile(40000)
	var s *Snapshot
	n := testutil.Allocated(func() { s, _ = Parse(b) })
	kept := testutil.RetainedLeast(3, func() any { s, _ := Parse(b); return s.WithoutData() })
	t.Logf("%d-byte file, %d entries: parse allocated %d KiB (bound %d), layout keeps %d KiB (bound %d), %d entries",
		len(b), s.Header.NumEntries, n>>10, maxParseAlloc>>10, kept>>10, maxParseKept>>10, s.Len())
	if n > maxParseAlloc {
		t.Errorf("parse allocated %d bytes, bound %d", n, maxParseAlloc)
	}
	if kept > maxParseKept {
		t.Errorf("layout keeps %d bytes, bound %d", kept, maxParseKept)
	}
}

// ParseWanted keeps the wanted entries only, at most MaxWantedEntries of them.
func TestParseWantedKeepsWantedOnly(t *testing.T) {
	b := CraftedFile(40000)
	one := func(name []byte) bool { return string(name) == "sun.rt.createVmBeginTime" }
	var s *Snapshot
	kept := testutil.RetainedLeast(3, func() any { s, _ = ParseWanted(b, one); return s.WithoutData() })
	// (A few KiB of the live heap's measure are the runtime's own: the bound leaves room.)
	if _, ok := s.Int("sun.rt.createVmBeginTime"); !ok || s.Len() != 1 || kept > 16<<10 {
		t.Errorf("%d entries kept, %d bytes; want the start time alone", s.Len(), kept)
	}
	all := func([]byte) bool { return true }
	kept = testutil.RetainedLeast(3, func() any { s, _ = ParseWanted(b, all); return s.WithoutData() })
	t.Logf("every entry wanted: %d kept (capped %v), %d KiB", s.Len(), s.Capped, kept>>10)
	if s.Len() != MaxWantedEntries || !s.Capped || kept > 64<<10 {
		t.Errorf("every entry wanted: %d kept (capped %v), %d bytes", s.Len(), s.Capped, kept)
	}
	// A re-read of the same file reuses the capped layout and its filter.
	if r, err := s.Reparse(b); err != nil || !s.SameLayout(r) || !r.Capped {
		t.Errorf("reparse: %v, same layout %v", err, s.SameLayout(r))
	}
}

// CraftedFile is a perf data file of n tiny entries and a VM start time (testutil's
// CraftedPerfData), padded to MaxFileSize.
func CraftedFile(n int) []byte {
	return testutil.CraftedPerfData{Entries: n, VMStartMillis: time.Now().UnixMilli(), Padding: MaxFileSize}.Bytes()
}
