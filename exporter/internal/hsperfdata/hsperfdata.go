// Package hsperfdata parses HotSpot performance data files (/tmp/hsperfdata_<user>/<pid>), the
// shared-memory counters that jstat reads. Reading the file needs no attach, agent or signal.
//
// The JVM writes the file with no lock while it is being read, so the parser treats every
// offset and length as untrusted: an entry that does not fit, or whose length is still 0, ends
// the walk; strings are cut at the first NUL; nothing panics on any input.
package hsperfdata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// MaxFileSize caps how much of a perf data file is read (the default file is 32 KiB;
// -XX:PerfDataMemorySize can raise it).
const MaxFileSize = 1 << 20

// maxString caps one string value; the longest real ones (java.rt.vmArgs, class paths) are
// bounded by the file anyway, this only limits allocations on garbage.
const maxString = 64 << 10

// Caps on what a parse keeps, whatever the file holds (a 1 MiB file can hold 40 000 tiny
// entries: kept whole, 3.4 MiB per JVM). Real files have ~150-230 entries of names of at
// most ~60 bytes; the exporter reads ~40 of them.
const (
	// MaxEntries caps the entries Parse keeps (then Capped is set).
	MaxEntries = 1024
	// MaxWantedEntries caps the entries ParseWanted keeps.
	MaxWantedEntries = 128
	// MaxName caps an entry's name: entries with longer names are skipped.
	MaxName = 128
)

const headerSize = 32

// entryHeaderSize is entry_length, name_offset, vector_length (4 each), data_type, flags,
// units, variability (1 each) and data_offset (4).
const entryHeaderSize = 20

var magic = []byte{0xCA, 0xFE, 0xC0, 0xC0}

// Errors returned by Parse; the file being written while read never produces one of these
// except ErrShort for a file truncated inside the header.
var (
	ErrMagic   = errors.New("hsperfdata: bad magic")
	ErrShort   = errors.New("hsperfdata: file shorter than header")
	ErrVersion = errors.New("hsperfdata: unsupported version")
)

// Units of an entry (PerfData::Units).
type Units uint8

// Unit values.
const (
	UnitsNone   Units = 1
	UnitsBytes  Units = 2
	UnitsTicks  Units = 3
	UnitsEvents Units = 4
	UnitsString Units = 5
	UnitsHertz  Units = 6
)

// Variability of an entry (PerfData::Variability).
type Variability uint8

// Variability values.
const (
	Constant  Variability = 1
	Monotonic Variability = 2
	Variable  Variability = 3
)

// Header is the prologue of the file.
type Header struct {
	BigEndian    bool
	Major, Minor uint8
	// Accessible is set once the VM finished initialising the counters.
	Accessible bool
	Used       uint32
	Overflow   uint32
	// ModTimeStamp changes when entries are added; with NumEntries it keys the layout cache.
	ModTimeStamp int64
	EntryOffset  uint32
	NumEntries   uint32
}

// Entry describes one counter. Values are read through Snapshot.
type Entry struct {
	Name         string
	Type         byte // 'J' int64, 'B' byte array (strings)
	Units        Units
	Variability  Variability
	VectorLength int // 0 for a scalar
	dataOff      int // absolute offset of the value in the file
}

// Snapshot is one parsed copy of a perf data file. It is immutable and safe for concurrent use.
type Snapshot struct {
	Header Header
	// Truncated is set when the walk stopped before NumEntries entries (a counted entry not
	// yet written, or a short read); the entries found are still valid.
	Truncated bool
	// Capped is set when the walk stopped at the cap on kept entries.
	Capped bool
	layout *layout
	data   []byte
	order  binary.ByteOrder
}

// Wanted tells, by its name, whether an entry is one a reader uses: ParseWanted keeps no
// other. It must not keep name.
type Wanted func(name []byte) bool

// layout is the result of walking the entries; it is shared by snapshots of the same file as
// long as the header says no entry was added.
type layout struct {
	entries []Entry
	index   map[string]int
	end     int    // end of the last entry walked
	wanted  Wanted // nil: every entry
}

// Parse parses a perf data file held in b, keeping the layout of its first MaxEntries
// entries (for tools and tests; readers use ParseWanted). b is retained: do not modify it
// afterwards.
func Parse(b []byte) (*Snapshot, error) { return ParseWanted(b, nil) }

// ParseWanted parses a perf data file held in b and keeps the layout (name to offset) of
// the entries wanted accepts, at most MaxWantedEntries (nil: every entry, at most
// MaxEntries). What it allocates and what the layout keeps are bounded by those caps,
// whatever the file holds. b is retained: do not modify it afterwards.
func ParseWanted(b []byte, wanted Wanted) (*Snapshot, error) {
	h, order, err := parseHeader(b)
	if err != nil {
		return nil, err
	}
	l, truncated, capped := walk(b, h, order, wanted)
	return &Snapshot{Header: h, Truncated: truncated, Capped: capped, layout: l, data: b, order: order}, nil
}

// Reparse parses b, a newer read of the same file, reusing the entry layout of s when the
// header shows that no entry was added since (same entry count and mod time stamp). That makes
// a scrape's re-read a header check plus value lookups instead of a walk of every entry.
func (s *Snapshot) Reparse(b []byte) (*Snapshot, error) {
	if s == nil {
		return Parse(b)
	}
	h, order, err := parseHeader(b)
	if err != nil {
		return nil, err
	}
	if h.NumEntries == s.Header.NumEntries && h.ModTimeStamp == s.Header.ModTimeStamp &&
		h.BigEndian == s.Header.BigEndian && h.EntryOffset == s.Header.EntryOffset &&
		!s.Truncated && s.layout.end <= len(b) {
		return &Snapshot{Header: h, Capped: s.Capped, layout: s.layout, data: b, order: order}, nil
	}
	return ParseWanted(b, s.layout.wanted)
}

func parseHeader(b []byte) (Header, binary.ByteOrder, error) {
	var h Header
	if len(b) < headerSize {
		if len(b) >= 4 && !bytes.Equal(b[:4], magic) {
			return h, nil, ErrMagic
		}
		return h, nil, ErrShort
	}
	if !bytes.Equal(b[:4], magic) {
		return h, nil, ErrMagic
	}
	var order binary.ByteOrder = binary.LittleEndian
	if b[4] == 0 {
		order = binary.BigEndian
		h.BigEndian = true
	}
	h.Major, h.Minor = b[5], b[6]
	if h.Major != 2 {
		return h, nil, fmt.Errorf("%w %d.%d", ErrVersion, h.Major, h.Minor)
	}
	h.Accessible = b[7] != 0
	h.Used = order.Uint32(b[8:])
	h.Overflow = order.Uint32(b[12:])
	h.ModTimeStamp = int64(order.Uint64(b[16:]))
	h.EntryOffset = order.Uint32(b[24:])
	h.NumEntries = order.Uint32(b[28:])
	return h, order, nil
}

// walk collects the entries wanted accepts (nil: all), up to their cap. Any inconsistency
// ends the walk instead of failing the parse: the writer appends entries and bumps the count
// before or after filling them in. What the file claims sizes nothing beyond the cap.
func walk(b []byte, h Header, order binary.ByteOrder, wanted Wanted) (l *layout, truncated, capped bool) {
	limit := len(b)
	if h.Used >= headerSize && int64(h.Used) < int64(limit) {
		limit = int(h.Used)
	}
	keep := MaxEntries
	if wanted != nil {
		keep = MaxWantedEntries
	}
	// Sized for what the file claims, at most the cap: each entry takes at least a header.
	n := int(min(int64(h.NumEntries), int64(limit/entryHeaderSize), int64(keep)))
	l = &layout{entries: make([]Entry, 0, n), index: make(map[string]int, n), wanted: wanted}
	off := int64(h.EntryOffset)
	l.end = int(min(off, int64(limit)))
	for i := uint32(0); i < h.NumEntries; i++ {
		if off < headerSize || off+entryHeaderSize > int64(limit) {
			return l, true, false
		}
		e := b[off:]
		length := int64(order.Uint32(e[0:]))
		nameOff := int64(order.Uint32(e[4:]))
		vecLen := int64(order.Uint32(e[8:]))
		dataOff := int64(order.Uint32(e[16:]))
		if length < entryHeaderSize || off+length > int64(limit) ||
			nameOff < entryHeaderSize || nameOff >= length || dataOff < nameOff || dataOff > length {
			return l, true, false
		}
		ent := Entry{
			Type:        e[12],
			Units:       Units(e[14]),
			Variability: Variability(e[15]),
		}
		nameBytes := e[nameOff:length]
		if j := bytes.IndexByte(nameBytes, 0); j >= 0 {
			nameBytes = nameBytes[:j]
		} else {
			return l, true, false // a name without its NUL is still being written
		}
		size := int64(8)
		switch ent.Type {
		case 'J':
			if vecLen > 0 {
				size = 8 * vecLen
			}
		case 'B':
			size = vecLen
		default:
			size = 0
		}
		if vecLen > 0 {
			ent.VectorLength = int(min(vecLen, math.MaxInt32))
		}
		if dataOff+size > length {
			return l, true, false
		}
		ent.dataOff = int(off + dataOff)
		if len(nameBytes) > 0 && len(nameBytes) <= MaxName && (wanted == nil || wanted(nameBytes)) {
			if _, dup := l.index[string(nameBytes)]; !dup {
				if len(l.entries) == keep {
					return l, false, true
				}
				ent.Name = string(nameBytes) // a copy: the layout outlives the file's bytes
				l.index[ent.Name] = len(l.entries)
				l.entries = append(l.entries, ent)
			}
		}
		off += length
		l.end = int(off)
	}
	return l, false, false
}

// Entries lists the entries in file order.
func (s *Snapshot) Entries() []Entry {
	return append([]Entry(nil), s.layout.entries...)
}

// Lookup returns the entry called name.
func (s *Snapshot) Lookup(name string) (Entry, bool) {
	i, ok := s.layout.index[name]
	if !ok {
		return Entry{}, false
	}
	return s.layout.entries[i], true
}

// Int returns a scalar 'J' counter.
func (s *Snapshot) Int(name string) (int64, bool) {
	e, ok := s.Lookup(name)
	if !ok || e.Type != 'J' || e.VectorLength != 0 || e.dataOff+8 > len(s.data) {
		return 0, false
	}
	return int64(s.order.Uint64(s.data[e.dataOff:])), true
}

// String returns a 'B' entry as a string, cut at the first NUL (a torn string shows as a
// shorter or mixed value, never as an error) and capped in length.
func (s *Snapshot) String(name string) (string, bool) {
	e, ok := s.Lookup(name)
	if !ok || e.Type != 'B' {
		return "", false
	}
	end := min(e.dataOff+min(e.VectorLength, maxString), len(s.data))
	if e.dataOff > end {
		return "", false
	}
	v := s.data[e.dataOff:end]
	if j := bytes.IndexByte(v, 0); j >= 0 {
		v = v[:j]
	}
	return string(v), true
}

// Frequency is sun.os.hrt.frequency, the tick rate of every ticks counter.
func (s *Snapshot) Frequency() (int64, bool) {
	f, ok := s.Int("sun.os.hrt.frequency")
	if !ok || f <= 0 {
		return 0, false
	}
	return f, true
}

// SameLayout reports whether o reuses the entry layout of s (Reparse found no new entries).
func (s *Snapshot) SameLayout(o *Snapshot) bool {
	return s != nil && o != nil && s.layout == o.layout
}

// WithoutData returns s without the file's bytes: its header and entry layout only, enough for
// Reparse and SameLayout (value lookups find nothing). A cache keeps this instead of a whole
// file per process.
func (s *Snapshot) WithoutData() *Snapshot {
	if s == nil {
		return nil
	}
	return &Snapshot{Header: s.Header, Truncated: s.Truncated, Capped: s.Capped, layout: s.layout, order: s.order}
}
