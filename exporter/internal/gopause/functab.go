package gopause

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/quota-exporter/quota_exporter/exporter/internal/elfscan"
)

// The Go function table (.gopclntab) in place: debug/gosym's NewTable makes a Func and a Sym
// of every function the table claims (an 8 MiB table claiming a million functions costs
// 152 MiB), so the few functions gopause needs are found by walking the table with bounded
// reads instead: the function table in order, each function's record for its name offset,
// the name, through three fixed windows. The layouts are debug/gosym/pclntab.go's: Go 1.2
// (through 1.15), 1.16, 1.18 and 1.20 (the same as 1.18 with another magic).

// pclnVersion is a function table layout, by the Go release that introduced it.
type pclnVersion int

const (
	pcln12 pclnVersion = iota + 1
	pcln116
	pcln118
)

// pclnMagic maps the table's first four bytes (read in either byte order) to its layout.
var pclnMagic = map[uint32]pclnVersion{
	0xfffffffb: pcln12,
	0xfffffffa: pcln116,
	0xfffffff0: pcln118,
	0xfffffff1: pcln118, // Go 1.20: the 1.18 layout
}

// windowSize is each of the walk's three read buffers.
const windowSize = 16 << 10

// funcsInPclntab finds the wanted functions in the function table of size bytes at file
// offset off, whose functions start at text (the .text section's address: Go 1.18+ store
// entries as offsets from it). A function's end is the next one's entry. It allocates the
// three windows and the result, whatever the table claims.
func funcsInPclntab(ctx context.Context, r io.ReaderAt, off, size, text uint64, wanted []string) (map[string]span, error) {
	hdr := make([]byte, min(8+8*8, size))
	if n, err := r.ReadAt(hdr, int64(off)); n < len(hdr) {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("gopclntab header past the end: %w", ErrNotGo)
		}
		return nil, err
	}
	// Header: 4-byte magic, two zeros, pc quantum, pointer size.
	if len(hdr) < 16 || hdr[4] != 0 || hdr[5] != 0 || (hdr[6] != 1 && hdr[6] != 2 && hdr[6] != 4) || (hdr[7] != 4 && hdr[7] != 8) {
		return nil, fmt.Errorf("gopclntab header: %w", ErrNotGo)
	}
	var order binary.ByteOrder = binary.LittleEndian
	ver, ok := pclnMagic[binary.LittleEndian.Uint32(hdr)]
	if !ok {
		order = binary.BigEndian
		if ver, ok = pclnMagic[binary.BigEndian.Uint32(hdr)]; !ok {
			return nil, fmt.Errorf("gopclntab magic %#x: %w", binary.LittleEndian.Uint32(hdr), ErrNotGo)
		}
	}
	ptr := uint64(hdr[7])
	uintptr := func(b []byte) uint64 {
		if len(b) < int(ptr) {
			return 0
		}
		if ptr == 4 {
			return uint64(order.Uint32(b))
		}
		return order.Uint64(b)
	}
	word := func(i uint64) uint64 {
		if 8+(i+1)*ptr > uint64(len(hdr)) {
			return 1 << 63 // beyond the header read: out of every range below
		}
		return uintptr(hdr[8+i*ptr:])
	}
	// nfunctab, where the function table, the records (funcdata) and the names are, and the
	// size of a function table field.
	nfunc := uint64(uint32(word(0)))
	var functab, funcdata, names, field uint64
	switch ver {
	case pcln12:
		functab, funcdata, names, field = 8+ptr, 0, 0, ptr
	case pcln116:
		functab, funcdata, names, field = word(6), word(6), word(2), ptr
	case pcln118:
		functab, funcdata, names, field = word(7), word(7), word(3), 4
	}
	if functab > size || names > size || (2*nfunc+1)*field > size-functab {
		return nil, fmt.Errorf("gopclntab: %d functions do not fit: %w", nfunc, ErrNotGo)
	}
	longest := 0
	for _, w := range wanted {
		longest = max(longest, len(w))
	}
	entries := elfscan.NewWindow(r, off+functab, (2*nfunc+1)*field, windowSize)
	records := elfscan.NewWindow(r, off+funcdata, size-funcdata, windowSize)
	nameTab := elfscan.NewWindow(r, off+names, size-names, windowSize)
	fieldAt := func(b []byte) uint64 {
		if field == 4 {
			return uint64(order.Uint32(b))
		}
		return uintptr(b)
	}
	pc := func(v uint64) uint64 {
		if ver >= pcln118 {
			return text + v
		}
		return v
	}
	// The name offset is the record's second field, after a uintptr entry (a uint32 entry
	// offset since Go 1.18).
	nameField := ptr
	if ver >= pcln118 {
		nameField = 4
	}
	fns := map[string]span{}
	for i := uint64(0); i < nfunc && len(fns) < len(wanted); i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e, err := entries.Bytes(2*i*field, int(3*field)) // entry, record offset, next entry
		if err != nil {
			return nil, err
		}
		if uint64(len(e)) < 3*field {
			break
		}
		rec, err := records.Bytes(fieldAt(e[field:])+nameField, 4)
		if err != nil {
			return nil, err
		}
		if len(rec) < 4 {
			continue
		}
		name, err := nameTab.Bytes(uint64(order.Uint32(rec)), longest+1)
		if err != nil {
			return nil, err
		}
		for _, w := range wanted {
			if _, seen := fns[w]; !seen && len(name) > len(w) && name[len(w)] == 0 && string(name[:len(w)]) == w {
				fns[w] = span{pc(fieldAt(e)), pc(fieldAt(e[2*field:]))}
			}
		}
	}
	return fns, nil
}
