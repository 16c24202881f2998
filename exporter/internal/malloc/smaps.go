package malloc

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
)

const maxSmaps = 256 << 20

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
	b, err := procread.ReadFile(ctx, filepath.Join(procfs, strconv.Itoa(pid), "smaps"), maxSmaps)
	if err != nil {
		return 0, fmt.Errorf("malloc: pid %d smaps: %w", pid, err)
	}
	return residentIn(ParseSmapsRss(b), ranges), nil
}

// SmapsEntry is a mapping with its resident bytes.
type SmapsEntry struct {
	Mapping
	Rss uint64
}

// ParseSmapsRss picks each mapping's Rss out of /proc/<pid>/smaps; it never panics.
func ParseSmapsRss(b []byte) []SmapsEntry {
	var out []SmapsEntry
	for line := range kernel.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("Rss:")); ok {
			if len(out) > 0 {
				v = bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB"))
				if kb, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 54); err == nil {
					out[len(out)-1].Rss = kb << 10
				}
			}
			continue
		}
		if m, ok := parseMapsLine(line); ok {
			out = append(out, SmapsEntry{Mapping: m})
		}
	}
	return out
}

func residentIn(entries []SmapsEntry, ranges []Range) uint64 {
	rs := append([]Range(nil), ranges...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start < rs[j].Start })
	var total uint64
	for _, e := range entries {
		if e.Rss == 0 || e.End <= e.Start {
			continue
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
			total += e.Rss
		case covered > 0:
			// Overflow-free proportion: Rss <= size, both below 2^64.
			total += uint64(float64(e.Rss) * float64(covered) / float64(size))
		}
	}
	return total
}
