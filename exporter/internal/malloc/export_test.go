package malloc

import (
	"bytes"
	"context"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
)

// Exported for tests only: the product code does not use these.

// ParseMaps parses the text of /proc/<pid>/maps. Lines that do not parse are skipped (a read
// capped in size can end in half a line); it never panics.
func ParseMaps(b []byte) []Mapping {
	var out []Mapping
	for line := range kernel.Lines(b) {
		if m, ok := parseMapsLine(line); ok {
			out = append(out, m)
		}
	}
	return out
}

// ParseSmapsRss picks each mapping's Rss out of /proc/<pid>/smaps; it never panics.
func ParseSmapsRss(b []byte) []SmapsEntry {
	var out []SmapsEntry
	var err error
	for e := range smapsEntries(bytes.NewReader(b), &err) {
		out = append(out, e)
	}
	return out
}

// countCPUList counts a kernel CPU list like "0-3,8,10-11"; 0 when malformed
// (kernel.CountCPUList), which makes onlineCPUs fall back to glibc's assumption.
func countCPUList(s string) int {
	n, _ := kernel.CountCPUList(s)
	return n
}

// ArenaLimit is arenaLimit reading the environment of pid under procfs.
func ArenaLimit(ctx context.Context, procfs, sysfs string, pid int) (int, string, error) {
	return arenaLimit(ctx, sysfs, pid, newEnviron(ctx, procfs, pid))
}
