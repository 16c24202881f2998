package malloc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"iter"
	"path/filepath"
	"strings"
)

// /proc/<pid>/maps and smaps are as long as the tenant makes them (vm.max_map_count, 65 530
// mappings by default, raised on some nodes; each line up to PATH_MAX). They are read as a
// stream, line by line through a fixed buffer, and only what Inspect needs is kept: the
// allocator and glibc evidence, at most maxCandidates candidate addresses and heuristic heaps.
// A reader holds ~300 KiB whatever the process maps (was: the whole file, up to 32 MiB for
// maps and 256 MiB for smaps, with 16 readers in parallel).
const (
	// maxLine is the longest line kept (a maps line is ~75 bytes plus a path of at most
	// PATH_MAX, 4096); longer ones are skipped.
	maxLine = 8 << 10
	// maxMapLines bounds the lines read of one file (16 times the default max_map_count; smaps
	// has ~25 lines per mapping, so a smaps read stops there too): what is beyond is not read.
	maxMapLines = 1 << 20
)

// lines yields the lines of r without their '\n', through one maxLine buffer; over-long lines
// are skipped. *err is set to a read error (not io.EOF) when the iteration ends.
func lines(r io.Reader, err *error) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		br := bufio.NewReaderSize(r, maxLine)
		skipping := false
		for n := 0; n < maxMapLines; n++ {
			line, e := br.ReadSlice('\n')
			if errors.Is(e, bufio.ErrBufferFull) {
				skipping = true
				continue
			}
			if !skipping && len(line) > 0 {
				if !yield(bytes.TrimSuffix(line, []byte{'\n'})) {
					return
				}
			}
			skipping = false
			if e != nil {
				if !errors.Is(e, io.EOF) {
					*err = e
				}
				return
			}
		}
	}
}

// mapsSummary is what Inspect uses of /proc/<pid>/maps, gathered mapping by mapping.
type mapsSummary struct {
	mappings  int
	glibc     string   // see glibcVersion
	allocLib  string   // allocator of the first mapped allocator library, "" for none
	loader    bool     // glibc's dynamic loader (ld-linux*) is mapped
	cands     []uint64 // heap candidates (see candidates), at most limit
	heuristic []Range  // heaps by their mapping shapes (see heuristicHeaps), at most limit
	prev      Mapping  // the previous mapping, for heuristic pairs
	limit     int
}

func newMapsSummary(limit int) *mapsSummary { return &mapsSummary{limit: limit} }

func (s *mapsSummary) add(m Mapping) {
	s.mappings++
	if m.Inode != 0 {
		if s.glibc == "" {
			s.glibc = libcVersion(m.Path)
		}
		if s.allocLib == "" {
			s.allocLib = libAllocator(m.Path)
		}
		if !s.loader {
			s.loader = strings.HasPrefix(filepath.Base(m.Path), "ld-linux")
		}
	}
	if m.Perms == "rw-p" && m.Anonymous() {
		a := (m.Start + HeapMaxSize - 1) &^ (HeapMaxSize - 1)
		for ; a >= m.Start && a < m.End && a+headerSize <= m.End && len(s.cands) < s.limit; a += HeapMaxSize {
			s.cands = append(s.cands, a)
		}
	}
	if rw := s.prev; s.mappings > 1 && len(s.heuristic) < s.limit && heapPair(rw, m) {
		s.heuristic = append(s.heuristic, Range{rw.Start, rw.Start + HeapMaxSize})
	}
	s.prev = Mapping{Start: m.Start, End: m.End, Perms: m.Perms, Inode: m.Inode}
	if m.Anonymous() && m.Path != "" {
		s.prev.Path = "[anon:" // Anonymous() only looks at the prefix
	}
}

// scanMaps streams maps text from r into a summary.
func scanMaps(r io.Reader, limit int) (*mapsSummary, error) {
	s := newMapsSummary(limit)
	var err error
	for line := range lines(r, &err) {
		if m, ok := parseMapsLine(line); ok {
			s.add(m)
		}
	}
	return s, err
}

// smapsEntries streams smaps text from r, yielding each mapping with its Rss.
func smapsEntries(r io.Reader, err *error) iter.Seq[SmapsEntry] {
	return func(yield func(SmapsEntry) bool) {
		var cur SmapsEntry
		have := false
		for line := range lines(r, err) {
			if v, ok := bytes.CutPrefix(line, []byte("Rss:")); ok {
				if have {
					cur.Rss = parseKB(v)
				}
				continue
			}
			if m, ok := parseMapsLine(line); ok {
				if have && !yield(cur) {
					return
				}
				cur, have = SmapsEntry{Mapping: Mapping{Start: m.Start, End: m.End, Perms: m.Perms, Inode: m.Inode}}, true
			}
		}
		if have {
			yield(cur)
		}
	}
}
