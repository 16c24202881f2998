// Package elfscan reads the few things the exporter needs from a tenant's ELF executable in
// place, with allocation bounded by constants, whatever the file claims: the headers, a
// section by name, the symbols of a small wanted set, bytes at a virtual address.
//
// debug/elf cannot be used on tenant binaries: elf.NewFile reads the header tables and the
// section names at the size the file claims, Section.Data and the symbol readers read whole
// sections, and Symbols/DynamicSymbols copy each symbol's name: 43 690 symbols that all name
// one 1 MiB string (a 1 MiB table and a 1 MiB string table) cost it 43 GiB. Here the header
// tables and the section names are read under caps, and symbol tables are streamed through
// fixed buffers, reading at most the longest wanted name plus one byte of each symbol's name.
package elfscan

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Caps on a tenant's executable; each is far above what a toolchain writes.
const (
	// MaxBinarySize: larger executables are not inspected. The largest binaries on nodes
	// (kubelet, Prometheus) are 100-300 MiB; the cap also keeps a huge sparse file from
	// being scanned.
	MaxBinarySize = 1 << 30
	// MaxHeaderTable caps the program and the section header tables (64 KiB: 1024 section
	// headers; a Go binary has ~40, a C++ one a few dozen).
	MaxHeaderTable = 64 << 10
	// MaxSectionNames caps the section name table (a few hundred bytes in practice).
	MaxSectionNames = 64 << 10
	// MaxWantedName caps a name looked up in a symbol table: it bounds what is read of each
	// symbol's name.
	MaxWantedName = 256
	// bufSize is each streaming buffer: a symbol table, and its string table, are read in
	// pieces of this size.
	bufSize = 16 << 10
	// ctxEvery: a scan checks its context every this many entries, so a read given up by
	// its caller stops instead of scanning on.
	ctxEvery = 4096
)

// ErrTooLarge marks an executable or a table above its cap.
var ErrTooLarge = errors.New("executable or ELF table above its inspection cap")

// ErrNotELF marks a file that is not an ELF file, or a malformed one.
var ErrNotELF = errors.New("not an ELF file")

// File is what is read of an executable's headers: program headers and section headers
// (without their names, which stay in the capped name table).
type File struct {
	r        io.ReaderAt
	Is64     bool
	Order    binary.ByteOrder
	Machine  elf.Machine
	Progs    []Prog
	Sections []Section
	// SectionErr says why there are no sections although the header names a table: above
	// a cap (ErrTooLarge) or malformed (ErrNotELF). The program headers, which are what the
	// loader reads, may still serve.
	SectionErr error
	names      []byte // the section name table, at most MaxSectionNames
}

// Prog is a program header.
type Prog struct {
	Type                      elf.ProgType
	Flags                     elf.ProgFlag
	Off, Vaddr, Filesz, Memsz uint64
}

// Section is a section header; its name is looked up through File.Section.
type Section struct {
	nameOff uint32
	Type    elf.SectionType
	Flags   elf.SectionFlag
	Addr    uint64
	Offset  uint64
	Size    uint64
	Link    uint32
	Entsize uint64
	Index   int
}

// NewFile reads the ELF header, the program and section header tables and the section name
// table of the image read through r, refusing tables above their caps: program headers
// that cannot be read fail it, section headers leave SectionErr set and no sections. It
// allocates at most about 3 x 64 KiB, whatever the input.
func NewFile(r io.ReaderAt) (*File, error) {
	var ident [64]byte
	if n, _ := r.ReadAt(ident[:], 0); n < 52 || string(ident[:4]) != elf.ELFMAG {
		return nil, ErrNotELF
	}
	f := &File{r: r}
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		f.Order = binary.LittleEndian
	case elf.ELFDATA2MSB:
		f.Order = binary.BigEndian
	default:
		return nil, ErrNotELF
	}
	o := f.Order
	var phoff, shoff, phentsize, phnum, shentsize, shnum, shstrndx uint64
	switch elf.Class(ident[elf.EI_CLASS]) {
	case elf.ELFCLASS32:
		f.Machine = elf.Machine(o.Uint16(ident[18:]))
		phoff, shoff = uint64(o.Uint32(ident[28:])), uint64(o.Uint32(ident[32:]))
		phentsize, phnum = uint64(o.Uint16(ident[42:])), uint64(o.Uint16(ident[44:]))
		shentsize, shnum, shstrndx = uint64(o.Uint16(ident[46:])), uint64(o.Uint16(ident[48:])), uint64(o.Uint16(ident[50:]))
	case elf.ELFCLASS64:
		if n, _ := r.ReadAt(ident[:], 0); n < 64 {
			return nil, ErrNotELF
		}
		f.Is64 = true
		f.Machine = elf.Machine(o.Uint16(ident[18:]))
		phoff, shoff = o.Uint64(ident[32:]), o.Uint64(ident[40:])
		phentsize, phnum = uint64(o.Uint16(ident[54:])), uint64(o.Uint16(ident[56:]))
		shentsize, shnum, shstrndx = uint64(o.Uint16(ident[58:])), uint64(o.Uint16(ident[60:])), uint64(o.Uint16(ident[62:]))
	default:
		return nil, ErrNotELF
	}
	if err := f.readProgs(phoff, phentsize, phnum); err != nil {
		return nil, err
	}
	if err := f.readSections(shoff, shentsize, shnum, shstrndx); err != nil {
		f.Sections, f.names, f.SectionErr = nil, nil, err
	}
	return f, nil
}

func (f *File) readProgs(off, entsize, num uint64) error {
	minSize := uint64(32)
	if f.Is64 {
		minSize = 56
	}
	if num == 0 {
		return nil
	}
	if entsize < minSize {
		return ErrNotELF
	}
	if num*entsize > MaxHeaderTable {
		return fmt.Errorf("%w: program headers %d x %d", ErrTooLarge, num, entsize)
	}
	b, err := ReadFull(f.r, off, num*entsize)
	if err != nil {
		return err
	}
	f.Progs = make([]Prog, 0, num)
	o := f.Order
	for i := uint64(0); i < num; i++ {
		p := b[i*entsize:]
		var q Prog
		if f.Is64 {
			q = Prog{Type: elf.ProgType(o.Uint32(p[0:])), Flags: elf.ProgFlag(o.Uint32(p[4:])), Off: o.Uint64(p[8:]),
				Vaddr: o.Uint64(p[16:]), Filesz: o.Uint64(p[32:]), Memsz: o.Uint64(p[40:])}
		} else {
			q = Prog{Type: elf.ProgType(o.Uint32(p[0:])), Off: uint64(o.Uint32(p[4:])), Vaddr: uint64(o.Uint32(p[8:])),
				Filesz: uint64(o.Uint32(p[16:])), Memsz: uint64(o.Uint32(p[20:])), Flags: elf.ProgFlag(o.Uint32(p[24:]))}
		}
		f.Progs = append(f.Progs, q)
	}
	return nil
}

func (f *File) readSections(off, entsize, num, strndx uint64) error {
	minSize := uint64(40)
	if f.Is64 {
		minSize = 64
	}
	if off == 0 {
		return nil // no section headers (sstrip): the caller falls back to the program headers
	}
	if num == 0 || strndx == uint64(elf.SHN_XINDEX) {
		// Extended numbering: the counts live in section 0, up to 2^32 sections.
		return fmt.Errorf("%w: extended section numbering", ErrTooLarge)
	}
	if entsize < minSize {
		return ErrNotELF
	}
	if num*entsize > MaxHeaderTable {
		return fmt.Errorf("%w: section headers %d x %d", ErrTooLarge, num, entsize)
	}
	b, err := ReadFull(f.r, off, num*entsize)
	if err != nil {
		return err
	}
	f.Sections = make([]Section, 0, num)
	o := f.Order
	for i := uint64(0); i < num; i++ {
		s := b[i*entsize:]
		var q Section
		if f.Is64 {
			q = Section{nameOff: o.Uint32(s[0:]), Type: elf.SectionType(o.Uint32(s[4:])), Flags: elf.SectionFlag(o.Uint64(s[8:])),
				Addr: o.Uint64(s[16:]), Offset: o.Uint64(s[24:]), Size: o.Uint64(s[32:]), Link: o.Uint32(s[40:]), Entsize: o.Uint64(s[56:])}
		} else {
			q = Section{nameOff: o.Uint32(s[0:]), Type: elf.SectionType(o.Uint32(s[4:])), Flags: elf.SectionFlag(o.Uint32(s[8:])),
				Addr: uint64(o.Uint32(s[12:])), Offset: uint64(o.Uint32(s[16:])), Size: uint64(o.Uint32(s[20:])), Link: o.Uint32(s[24:]),
				Entsize: uint64(o.Uint32(s[36:]))}
		}
		q.Index = int(i)
		f.Sections = append(f.Sections, q)
	}
	if strndx >= num {
		return nil // no section names: no section can be found by name
	}
	names := f.Sections[strndx]
	if names.Size > MaxSectionNames {
		return fmt.Errorf("%w: section names %d bytes", ErrTooLarge, names.Size)
	}
	if names.Type != elf.SHT_NOBITS {
		f.names, err = ReadFull(f.r, names.Offset, names.Size)
	}
	return err
}

// Section returns the first section called name, nil if there is none.
func (f *File) Section(name string) *Section {
	for i := range f.Sections {
		s := &f.Sections[i]
		if int64(s.nameOff) < int64(len(f.names)) {
			rest := f.names[s.nameOff:]
			if len(rest) > len(name) && rest[len(name)] == 0 && string(rest[:len(name)]) == name {
				return s
			}
		}
	}
	return nil
}

// SectionOfType returns the first section of type t, nil if there is none.
func (f *File) SectionOfType(t elf.SectionType) *Section {
	for i := range f.Sections {
		if f.Sections[i].Type == t {
			return &f.Sections[i]
		}
	}
	return nil
}

// Segment returns the PT_LOAD segment whose file contents hold addr and whose flags include
// want, with addr's offset in the file and how many bytes of the segment's file contents
// follow it.
func (f *File) Segment(addr uint64, want elf.ProgFlag) (p *Prog, off, avail uint64, ok bool) {
	for i := range f.Progs {
		p := &f.Progs[i]
		if p.Type == elf.PT_LOAD && p.Flags&want == want && addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			return p, p.Off + (addr - p.Vaddr), p.Filesz - (addr - p.Vaddr), true
		}
	}
	return nil, 0, 0, false
}

// ReadAddr reads up to n bytes at virtual address addr, which must lie in a PT_LOAD
// segment's file contents; fewer when the segment ends first. n is the caller's cap.
func (f *File) ReadAddr(addr, n uint64) ([]byte, error) {
	_, off, avail, ok := f.Segment(addr, 0)
	if !ok {
		return nil, fmt.Errorf("%w: address %#x in no loaded segment", ErrNotELF, addr)
	}
	return ReadFull(f.r, off, min(n, avail))
}

// Reader is the underlying image.
func (f *File) Reader() io.ReaderAt { return f.r }

// ReadFull reads n bytes at off (n capped by the caller); a short read is ErrNotELF.
func ReadFull(r io.ReaderAt, off, n uint64) ([]byte, error) {
	if off > 1<<62 || n > 1<<62 {
		return nil, ErrNotELF
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, int64(off)); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: %d bytes at %#x past the end", ErrNotELF, n, off)
		}
		return nil, err
	}
	return b, nil
}

// Symbol is one symbol found by Symbols. Name is the wanted string it matched.
type Symbol struct {
	Name    string
	Info    byte
	Other   byte
	Section elf.SectionIndex
	Value   uint64
	Size    uint64
}

// Type is the symbol's type (STT_FUNC, ...).
func (s Symbol) Type() elf.SymType { return elf.ST_TYPE(s.Info) }

// Defined reports whether the symbol is defined in this file.
func (s Symbol) Defined() bool { return s.Section != elf.SHN_UNDEF }

// Symbols streams the symbol table sec (SHT_SYMTAB or SHT_DYNSYM) and calls found for every
// symbol whose name is one of wanted (each at most MaxWantedName bytes), with the symbol's
// name being that wanted string; found returns true to stop the scan. Of each symbol's
// name it reads at most the longest wanted name plus one byte: two 16 KiB buffers are all
// it allocates, whatever the table holds. It stops with ctx's error when ctx ends.
func (f *File) Symbols(ctx context.Context, sec *Section, wanted []string, found func(Symbol) bool) error {
	longest := 0
	for _, w := range wanted {
		if len(w) > MaxWantedName {
			return fmt.Errorf("wanted symbol name of %d bytes, above %d", len(w), MaxWantedName)
		}
		longest = max(longest, len(w))
	}
	if sec == nil || (sec.Type != elf.SHT_SYMTAB && sec.Type != elf.SHT_DYNSYM) {
		return fmt.Errorf("%w: not a symbol table", ErrNotELF)
	}
	if int(sec.Link) >= len(f.Sections) || f.Sections[sec.Link].Type != elf.SHT_STRTAB {
		return fmt.Errorf("%w: symbol table without a string table", ErrNotELF)
	}
	strtab := f.Sections[sec.Link]
	entSize := uint64(16)
	if f.Is64 {
		entSize = 24
	}
	names := NewWindow(f.r, strtab.Offset, strtab.Size, bufSize)
	syms := NewWindow(f.r, sec.Offset, sec.Size, bufSize-bufSize%int(entSize))
	o := f.Order
	// Entry 0 is the undefined symbol.
	for i, off := 0, entSize; off+entSize <= sec.Size; i, off = i+1, off+entSize {
		if i%ctxEvery == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		e, err := syms.Bytes(off, int(entSize))
		if err != nil {
			return err
		}
		if len(e) < int(entSize) {
			return nil
		}
		nameOff := uint64(o.Uint32(e[0:]))
		if nameOff == 0 || nameOff >= strtab.Size {
			continue
		}
		name, err := names.Bytes(nameOff, longest+1)
		if err != nil {
			return err
		}
		match := ""
		for _, w := range wanted {
			if len(name) > len(w) && name[len(w)] == 0 && string(name[:len(w)]) == w {
				match = w
				break
			}
		}
		if match == "" {
			continue
		}
		s := Symbol{Name: match}
		if f.Is64 {
			s.Info, s.Other, s.Section = e[4], e[5], elf.SectionIndex(o.Uint16(e[6:]))
			s.Value, s.Size = o.Uint64(e[8:]), o.Uint64(e[16:])
		} else {
			s.Value, s.Size = uint64(o.Uint32(e[4:])), uint64(o.Uint32(e[8:]))
			s.Info, s.Other, s.Section = e[12], e[13], elf.SectionIndex(o.Uint16(e[14:]))
		}
		if found(s) {
			return nil
		}
	}
	return nil
}

// Window reads a region of a file through one fixed buffer: small reads at nearby, mostly
// increasing offsets (a table walked in order, the strings it points at) cost one ReadAt per
// buffer's worth, and what it holds never exceeds the buffer.
type Window struct {
	r          io.ReaderAt
	base, size uint64 // the region: size bytes at file offset base
	buf        []byte
	at         uint64 // region offset of buf[0]
	n          int    // valid bytes in buf
}

// NewWindow makes a window on size bytes at file offset base of r, with a buffer of bufSize
// bytes (allocated on first use).
func NewWindow(r io.ReaderAt, base, size uint64, bufSize int) *Window {
	return &Window{r: r, base: base, size: size, buf: make([]byte, 0, bufSize)}
}

// Bytes returns up to n bytes (n at most the buffer's size) at offset off of the region,
// fewer where the region or the file ends; the slice is valid until the next call.
func (w *Window) Bytes(off uint64, n int) ([]byte, error) {
	if n > cap(w.buf) {
		return nil, fmt.Errorf("window read of %d bytes, above its %d-byte buffer", n, cap(w.buf))
	}
	if off >= w.size {
		return nil, nil
	}
	want := min(uint64(n), w.size-off)
	if off >= w.at && off+want <= w.at+uint64(w.n) {
		return w.buf[off-w.at : off-w.at+want], nil
	}
	if w.base+off < w.base || w.base+off > 1<<62 {
		return nil, ErrNotELF
	}
	fill := min(uint64(cap(w.buf)), w.size-off)
	w.buf = w.buf[:fill]
	k, err := w.r.ReadAt(w.buf, int64(w.base+off))
	if err != nil && !errors.Is(err, io.EOF) {
		w.n = 0
		return nil, err
	}
	w.at, w.n = off, k
	return w.buf[:min(uint64(k), want)], nil
}
