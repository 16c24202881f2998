package malloc

import "encoding/binary"

// HeapMaxSize is glibc's HEAP_MAX_SIZE on 64-bit targets (2 * DEFAULT_MMAP_THRESHOLD_MAX):
// every non-main arena heap is mapped at a multiple of it and never grows beyond it.
const HeapMaxSize = 64 << 20

// headerSize is the part of glibc's heap_info read here: ar_ptr, prev, size, mprotect_size.
// (glibc >= 2.35 adds a pagesize word and padding: sizeof(heap_info) is 48, before 32.)
const headerSize = 32

const pageSize = 4096 // size and mprotect_size are multiples of the page size, at least 4 KiB

// Header is the start of glibc's heap_info.
type Header struct {
	Addr         uint64 // where it was read: a multiple of HeapMaxSize
	ArPtr        uint64 // the arena (struct malloc_state) this heap belongs to
	Prev         uint64 // previous heap of the same arena, 0 for the arena's first heap
	Size         uint64 // bytes in use
	MprotectSize uint64 // bytes mapped read-write
}

// ParseHeader decodes a little-endian heap_info read at addr (amd64, arm64).
func ParseHeader(addr uint64, b []byte) (Header, bool) {
	if len(b) < headerSize {
		return Header{}, false
	}
	return Header{
		Addr:         addr,
		ArPtr:        binary.LittleEndian.Uint64(b[0:]),
		Prev:         binary.LittleEndian.Uint64(b[8:]),
		Size:         binary.LittleEndian.Uint64(b[16:]),
		MprotectSize: binary.LittleEndian.Uint64(b[24:]),
	}, true
}

// Plausible checks one header on its own. Beyond the rules glibc keeps (size <= mprotect_size
// <= HEAP_MAX_SIZE, prev aligned) it rejects zeroed memory and ties ar_ptr to the heap: an
// arena's first heap holds its malloc_state right after heap_info (ar_ptr = h + sizeof
// heap_info, 32 or 48 bytes), a later heap points into another heap.
func (h Header) Plausible() bool {
	switch {
	case h.Addr%HeapMaxSize != 0,
		h.ArPtr == 0 || h.ArPtr%16 != 0,
		h.Size == 0 || h.Size%pageSize != 0 || h.MprotectSize%pageSize != 0,
		h.Size > h.MprotectSize || h.MprotectSize > HeapMaxSize,
		h.Prev%HeapMaxSize != 0 || h.Prev == h.Addr:
		return false
	}
	if h.Prev == 0 {
		off := h.ArPtr - h.Addr // wraps to huge when ArPtr < Addr
		return off >= headerSize && off <= 128
	}
	return h.ArPtr/HeapMaxSize != h.Addr/HeapMaxSize
}

// First reports whether h is the first heap of its arena.
func (h Header) First() bool { return h.Prev == 0 }

// Validate keeps the headers that form consistent arenas: first heaps, and later heaps whose
// ar_ptr names an accepted first heap's arena and whose prev is an accepted heap. It returns
// the accepted heaps and the number of distinct arenas.
func Validate(cands []Header) (heaps []Header, arenas int) {
	ok := make(map[uint64]bool)    // accepted heap addresses
	arena := make(map[uint64]bool) // ar_ptr of accepted first heaps
	var chained []Header
	for _, h := range cands {
		if !h.Plausible() {
			continue
		}
		if h.First() {
			if !ok[h.Addr] {
				ok[h.Addr] = true
				arena[h.ArPtr] = true
				heaps = append(heaps, h)
			}
			continue
		}
		chained = append(chained, h)
	}
	// Chains can be listed in any address order: repeat until nothing changes.
	for changed := true; changed; {
		changed = false
		for _, h := range chained {
			if !ok[h.Addr] && arena[h.ArPtr] && ok[h.Prev] {
				ok[h.Addr] = true
				heaps = append(heaps, h)
				changed = true
			}
		}
	}
	return heaps, len(arena)
}

// heuristicHeaps is the maps-only method: an anonymous rw-p mapping that starts on a
// HEAP_MAX_SIZE boundary, followed directly by an anonymous ---p mapping, 64 MiB together.
// It misses full heaps (64 MiB rw-p, often merged with a neighbour into one mapping) and
// cannot tell arenas from heaps.
func heuristicHeaps(maps []Mapping) []Range {
	s := newMapsSummary(len(maps))
	for _, m := range maps {
		s.add(m)
	}
	return s.heuristic
}

// heapPair reports whether rw and the mapping after it, res, are a heap's two parts: an
// aligned anonymous rw-p mapping and the ---p reservation up to HEAP_MAX_SIZE.
func heapPair(rw, res Mapping) bool {
	return rw.Perms == "rw-p" && rw.Anonymous() && rw.Start%HeapMaxSize == 0 &&
		res.Perms == "---p" && res.Anonymous() && res.Start == rw.End && res.End-rw.Start == HeapMaxSize
}

// candidates lists every HEAP_MAX_SIZE-aligned address inside anonymous rw-p mappings: a
// heap's rw part starts there, possibly merged with the mapping below it.
func candidates(maps []Mapping, limit int) []uint64 {
	s := newMapsSummary(limit)
	for _, m := range maps {
		s.add(m)
	}
	return s.cands
}
