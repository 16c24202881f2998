package goruntime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/quota-exporter/quota_exporter/exporter/internal/elfcap"
)

// Build info is read from every watched process's executable, a file the tenant controls.
// debug/buildinfo (through debug/elf) reads the whole section and program header tables and
// the section name table at whatever size the file claims, and each string in chunks of up to
// 10 MiB, before any check: one crafted binary costs the exporter tens of MiB, 16 of them in
// parallel more than its memory limit, and Go has open issues of panics there. So the few
// structures needed are read here, each with a cap, and only the module text goes to
// runtime/debug.ParseBuildInfo. Every cap is far above what any Go toolchain writes.
const (
	// MaxBinarySize: larger executables are not inspected (reported as a parse error); see
	// elfcap.MaxBinarySize.
	MaxBinarySize = elfcap.MaxBinarySize
	// maxHeaderTable caps the program and the section header tables (elfcap.MaxHeaderTable).
	maxHeaderTable = elfcap.MaxHeaderTable
	// maxSectionNames caps the section name table (elfcap.MaxSectionNames).
	maxSectionNames = elfcap.MaxSectionNames
	// maxScan is how far into the data segment the build info blob is looked for when there
	// are no section headers: the linker puts it first.
	maxScan = 64 << 10
	// maxVersion caps the toolchain version string ("go1.26.8", "devel ...").
	maxVersion = 1 << 10
	// maxModInfo caps the module text (kubelet's is ~30 KiB: one line per dependency).
	maxModInfo = 1 << 20
)

var (
	buildInfoMagic = []byte("\xff Go buildinf:")
	errNotGo       = errors.New("not a Go executable")
)

// elfFile is what is read of an executable's ELF headers.
type elfFile struct {
	r     io.ReaderAt
	order binary.ByteOrder
	is64  bool
	progs []elfProg
}

type elfProg struct {
	typ, flags         uint32
	off, vaddr, filesz uint64
}

const (
	ptLoad = 1
	pfX    = 1
	pfW    = 2
)

// readAtMost reads n bytes at off (n capped by the caller): a short read is an error.
func readAtMost(r io.ReaderAt, off, n uint64) ([]byte, error) {
	if off > 1<<62 || n > 1<<62 {
		return nil, errNotGo
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, int64(off)); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errNotGo
		}
		return nil, err
	}
	return b, nil
}

// ReadBuildInfo returns the build info of a Go executable read through r, or errNotGo.
// I/O errors are returned as they are; a malformed Go binary is errNotGo too (it cannot be
// told from a non-Go one that happens to hold the magic). It is debug/buildinfo.Read with every
// structure read under a cap (see above); gopause uses it too, on the file it attaches through.
func ReadBuildInfo(r io.ReaderAt) (*debug.BuildInfo, error) {
	vers, mod, err := readRawBuildInfo(r)
	if err != nil {
		return nil, err
	}
	bi, err := debug.ParseBuildInfo(mod)
	if err != nil {
		return nil, fmt.Errorf("%w: module info: %v", ErrParse, err)
	}
	bi.GoVersion = vers
	return bi, nil
}

func readRawBuildInfo(r io.ReaderAt) (vers, mod string, err error) {
	f, start, size, err := openELF(r)
	if err != nil {
		return "", "", err
	}
	// The blob is 16-byte aligned, at the start of .go.buildinfo or near the start of the
	// first writable data segment.
	scan, err := f.read(start, min(size, maxScan))
	if err != nil {
		return "", "", err
	}
	at := -1
	for i := 0; i+32 <= len(scan); i += 16 {
		if bytes.HasPrefix(scan[i:], buildInfoMagic) {
			at = i
			break
		}
	}
	if at < 0 {
		return "", "", errNotGo
	}
	hdr := scan[at : at+32]
	addr := start + uint64(at)
	ptrSize, flags := int(hdr[14]), hdr[15]
	if flags&2 != 0 { // Go 1.18+: two varint-prefixed strings after the header
		vers, next, err := f.varString(addr+32, maxVersion)
		if err != nil {
			return "", "", err
		}
		mod, _, err = f.varString(next, maxModInfo)
		if err != nil {
			return "", "", err
		}
		return finish(vers, mod)
	}
	// Before Go 1.18: pointers to two Go string headers.
	var order binary.ByteOrder = binary.LittleEndian
	if flags&1 != 0 {
		order = binary.BigEndian
	}
	ptr := func(b []byte) uint64 {
		if ptrSize == 4 {
			return uint64(order.Uint32(b))
		}
		return order.Uint64(b)
	}
	if ptrSize != 4 && ptrSize != 8 {
		return "", "", errNotGo
	}
	vers = f.goString(ptr(hdr[16:]), ptrSize, ptr, maxVersion)
	mod = f.goString(ptr(hdr[16+ptrSize:]), ptrSize, ptr, maxModInfo)
	return finish(vers, mod)
}

// finish strips the module text's sentinel framing, as debug/buildinfo does.
func finish(vers, mod string) (string, string, error) {
	if vers == "" {
		return "", "", errNotGo
	}
	if len(mod) >= 33 && mod[len(mod)-17] == '\n' {
		mod = mod[16 : len(mod)-16]
	} else {
		mod = ""
	}
	return vers, mod, nil
}

// openELF reads the ELF and program headers and finds where the build info should be: the
// .go.buildinfo section, else the first writable, non-executable PT_LOAD segment. It returns
// that range's virtual address and size.
func openELF(r io.ReaderAt) (*elfFile, uint64, uint64, error) {
	ident, err := readAtMost(r, 0, 16)
	if err != nil || !bytes.HasPrefix(ident, []byte("\x7fELF")) {
		return nil, 0, 0, errNotGo
	}
	f := &elfFile{r: r}
	switch ident[5] {
	case 1:
		f.order = binary.LittleEndian
	case 2:
		f.order = binary.BigEndian
	default:
		return nil, 0, 0, errNotGo
	}
	var phoff, shoff uint64
	var phentsize, phnum, shentsize, shnum, shstrndx uint64
	switch ident[4] {
	case 1: // 32-bit
		h, err := readAtMost(r, 0, 52)
		if err != nil {
			return nil, 0, 0, err
		}
		o := f.order
		phoff, shoff = uint64(o.Uint32(h[28:])), uint64(o.Uint32(h[32:]))
		phentsize, phnum = uint64(o.Uint16(h[42:])), uint64(o.Uint16(h[44:]))
		shentsize, shnum, shstrndx = uint64(o.Uint16(h[46:])), uint64(o.Uint16(h[48:])), uint64(o.Uint16(h[50:]))
	case 2:
		f.is64 = true
		h, err := readAtMost(r, 0, 64)
		if err != nil {
			return nil, 0, 0, err
		}
		o := f.order
		phoff, shoff = o.Uint64(h[32:]), o.Uint64(h[40:])
		phentsize, phnum = uint64(o.Uint16(h[54:])), uint64(o.Uint16(h[56:]))
		shentsize, shnum, shstrndx = uint64(o.Uint16(h[58:])), uint64(o.Uint16(h[60:])), uint64(o.Uint16(h[62:]))
	default:
		return nil, 0, 0, errNotGo
	}
	// Program headers: needed to map addresses to file offsets.
	minPh := uint64(32)
	if f.is64 {
		minPh = 56
	}
	if phnum == 0 || phentsize < minPh || phnum*phentsize > maxHeaderTable {
		return nil, 0, 0, errNotGo
	}
	ph, err := readAtMost(r, phoff, phnum*phentsize)
	if err != nil {
		return nil, 0, 0, err
	}
	for i := uint64(0); i < phnum; i++ {
		p := ph[i*phentsize:]
		var q elfProg
		o := f.order
		if f.is64 {
			q = elfProg{typ: o.Uint32(p[0:]), flags: o.Uint32(p[4:]), off: o.Uint64(p[8:]), vaddr: o.Uint64(p[16:]), filesz: o.Uint64(p[32:])}
		} else {
			q = elfProg{typ: o.Uint32(p[0:]), off: uint64(o.Uint32(p[4:])), vaddr: uint64(o.Uint32(p[8:])), filesz: uint64(o.Uint32(p[16:])), flags: o.Uint32(p[24:])}
		}
		if q.typ == ptLoad {
			f.progs = append(f.progs, q)
		}
	}
	if addr, size, ok := f.buildInfoSection(shoff, shentsize, shnum, shstrndx); ok {
		return f, addr, size, nil
	}
	for _, p := range f.progs {
		if p.flags&(pfX|pfW) == pfW && p.filesz > 0 {
			return f, p.vaddr, p.filesz, nil
		}
	}
	return nil, 0, 0, errNotGo
}

// buildInfoSection finds .go.buildinfo in the section headers, if they are there and small.
func (f *elfFile) buildInfoSection(shoff, shentsize, shnum, shstrndx uint64) (addr, size uint64, ok bool) {
	minSh := uint64(40)
	if f.is64 {
		minSh = 64
	}
	if shoff == 0 || shnum == 0 || shentsize < minSh || shnum*shentsize > maxHeaderTable || shstrndx >= shnum {
		return 0, 0, false
	}
	sh, err := readAtMost(f.r, shoff, shnum*shentsize)
	if err != nil {
		return 0, 0, false
	}
	type section struct{ name, addr, off, size uint64 }
	get := func(i uint64) section {
		s, o := sh[i*shentsize:], f.order
		if f.is64 {
			return section{uint64(o.Uint32(s[0:])), o.Uint64(s[16:]), o.Uint64(s[24:]), o.Uint64(s[32:])}
		}
		return section{uint64(o.Uint32(s[0:])), uint64(o.Uint32(s[12:])), uint64(o.Uint32(s[16:])), uint64(o.Uint32(s[20:]))}
	}
	strtab := get(shstrndx)
	if strtab.size > maxSectionNames {
		return 0, 0, false
	}
	names, err := readAtMost(f.r, strtab.off, strtab.size)
	if err != nil {
		return 0, 0, false
	}
	want := []byte(".go.buildinfo\x00")
	for i := uint64(0); i < shnum; i++ {
		s := get(i)
		if s.name < uint64(len(names)) && bytes.HasPrefix(names[s.name:], want) {
			return s.addr, s.size, s.size > 0
		}
	}
	return 0, 0, false
}

// read reads n bytes at virtual address addr, which must lie in one PT_LOAD segment's file
// contents; fewer when the segment ends first.
func (f *elfFile) read(addr, n uint64) ([]byte, error) {
	for _, p := range f.progs {
		if addr >= p.vaddr && addr-p.vaddr < p.filesz {
			n = min(n, p.filesz-(addr-p.vaddr))
			return readAtMost(f.r, p.off+(addr-p.vaddr), n)
		}
	}
	return nil, errNotGo
}

// varString reads a uvarint-prefixed string at addr of at most limit bytes.
func (f *elfFile) varString(addr, limit uint64) (string, uint64, error) {
	b, err := f.read(addr, binary.MaxVarintLen64)
	if err != nil {
		return "", 0, err
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > limit {
		return "", 0, errNotGo
	}
	s, err := f.read(addr+uint64(k), n)
	if err != nil || uint64(len(s)) < n {
		return "", 0, errNotGo
	}
	return string(s), addr + uint64(k) + n, nil
}

// goString reads a Go string header (pointer, length) at addr and the string it points to,
// "" when anything is off or the string is longer than limit.
func (f *elfFile) goString(addr uint64, ptrSize int, ptr func([]byte) uint64, limit uint64) string {
	h, err := f.read(addr, uint64(2*ptrSize))
	if err != nil || len(h) < 2*ptrSize {
		return ""
	}
	data, n := ptr(h), ptr(h[ptrSize:])
	if n > limit {
		return ""
	}
	s, err := f.read(data, n)
	if err != nil || uint64(len(s)) < n {
		return ""
	}
	return string(s)
}
