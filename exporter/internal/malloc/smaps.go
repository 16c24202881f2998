package malloc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// HeapResidentBytes sums the resident memory (smaps Rss) of the heaps in ranges (from
// State.HeapRanges). A mapping only partly covered by heaps (a full heap merged with a
// neighbouring anonymous mapping) contributes its Rss in proportion to the covered part.
//
// Reading smaps walks the target's page tables under its mmap lock: on a large process it
// takes long and stalls the target's page faults. Call it rarely.
func HeapResidentBytes(ctx context.Context, procfs string, pid int, ranges []Range) (uint64, error) {
	if len(ranges) == 0 {
		return 0, nil
	}
	rs := sortedRanges(ranges)
	total, err := procread.Do(ctx, func() (uint64, error) {
		f, err := os.Open(filepath.Join(procfs, strconv.Itoa(pid), "smaps"))
		if err != nil {
			return 0, err
		}
		defer f.Close()
		var total uint64
		var rerr error
		for e := range smapsEntries(f, &rerr) {
			total += residentOf(e, rs)
		}
		return total, rerr
	})
	if err != nil {
		return 0, fmt.Errorf("malloc: pid %d smaps: %w", pid, err)
	}
	return total, nil
}

// SmapsEntry is a mapping with its resident bytes.
type SmapsEntry struct {
	Mapping
	Rss uint64
}

// parseKB parses the value of an smaps "Rss:" line ("  1024 kB") into bytes; 0 if malformed.
func parseKB(v []byte) uint64 {
	v = bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB"))
	kb, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 54)
	if err != nil {
		return 0
	}
	return kb << 10
}

func sortedRanges(ranges []Range) []Range {
	rs := append([]Range(nil), ranges...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start < rs[j].Start })
	return rs
}

func residentIn(entries []SmapsEntry, ranges []Range) uint64 {
	rs := sortedRanges(ranges)
	var total uint64
	for _, e := range entries {
		total += residentOf(e, rs)
	}
	return total
}

// residentOf is the part of e's Rss that lies in the heaps rs.
func residentOf(e SmapsEntry, rs []Range) uint64 {
	if e.Rss == 0 || e.End <= e.Start {
		return 0
	}
	var covered uint64
	for _, r := range rs {
		lo, hi := max(r.Start, e.Start), min(r.End, e.End)
		if lo < hi {
			covered += hi - lo
		}
	}
	size := e.End - e.Start
	switch {
	case covered >= size:
		return e.Rss
	case covered > 0:
		// Overflow-free proportion: Rss <= size, both below 2^64.
		return uint64(float64(e.Rss) * float64(covered) / float64(size))
	}
	return 0
}
