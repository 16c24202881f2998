// Package elfcap opens a tenant's executable for debug/elf only when the tables debug/elf
// reads whole are small. elf.NewFile reads the program and section header tables and the
// section name table at whatever size the file claims (in chunks of up to 10 MiB, before any
// other check), and Section.Data and DynamicSymbols read a whole section: one crafted binary
// would cost the exporter hundreds of MiB. Open checks the headers first, from a few bytes.
package elfcap

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Bounds on a tenant's executable; each is far above what a toolchain writes.
const (
	// MaxBinarySize: larger executables are not inspected. The largest binaries on nodes
	// (kubelet, Prometheus, JVM launchers are small) are 100-300 MiB; the cap also keeps a
	// huge sparse file from being scanned.
	MaxBinarySize = 1 << 30
	// MaxHeaderTable caps the program and the section header tables (64 KiB: 1024 section
	// headers; a Go binary has ~40, a C++ one a few dozen).
	MaxHeaderTable = 64 << 10
	// MaxSectionNames caps the section name table (a few hundred bytes in practice).
	MaxSectionNames = 64 << 10
)

// ErrTooLarge marks an executable or a table above its cap.
var ErrTooLarge = errors.New("executable or ELF table above its inspection cap")

// ErrNotELF marks a file that is not an ELF executable.
var ErrNotELF = errors.New("not an ELF file")

// File is an executable opened by Open.
type File struct {
	*elf.File
	f *os.File
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Open opens path for debug/elf if it is a regular file of at most MaxBinarySize bytes
// whose header tables fit MaxHeaderTable and whose section names fit MaxSectionNames.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = ErrNotELF
	}
	if err == nil && fi.Size() > MaxBinarySize {
		err = fmt.Errorf("%w: %d bytes", ErrTooLarge, fi.Size())
	}
	if err == nil {
		err = Check(f)
	}
	var ef *elf.File
	if err == nil {
		ef, err = elf.NewFile(f)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{File: ef, f: f}, nil
}

// Check reads the ELF header of r and the section header of the section name table, and
// fails unless the tables elf.NewFile reads whole are within the caps.
func Check(r io.ReaderAt) error {
	h := make([]byte, 64)
	if n, _ := r.ReadAt(h, 0); n < 52 || string(h[:4]) != "\x7fELF" {
		return ErrNotELF
	}
	var o binary.ByteOrder = binary.LittleEndian
	if h[5] == 2 {
		o = binary.BigEndian
	}
	var shoff uint64
	var phentsize, phnum, shentsize, shnum, shstrndx uint64
	switch h[4] {
	case 1:
		shoff = uint64(o.Uint32(h[32:]))
		phentsize, phnum = uint64(o.Uint16(h[42:])), uint64(o.Uint16(h[44:]))
		shentsize, shnum, shstrndx = uint64(o.Uint16(h[46:])), uint64(o.Uint16(h[48:])), uint64(o.Uint16(h[50:]))
	case 2:
		shoff = o.Uint64(h[40:])
		phentsize, phnum = uint64(o.Uint16(h[54:])), uint64(o.Uint16(h[56:]))
		shentsize, shnum, shstrndx = uint64(o.Uint16(h[58:])), uint64(o.Uint16(h[60:])), uint64(o.Uint16(h[62:]))
	default:
		return ErrNotELF
	}
	if phnum*phentsize > MaxHeaderTable {
		return fmt.Errorf("%w: program headers %d x %d", ErrTooLarge, phnum, phentsize)
	}
	if shoff == 0 {
		return nil
	}
	if shnum == 0 || shstrndx >= 0xff00 {
		// Extended numbering: the counts live in section 0, up to 2^32 sections.
		return fmt.Errorf("%w: extended section numbering", ErrTooLarge)
	}
	if shnum*shentsize > MaxHeaderTable {
		return fmt.Errorf("%w: section headers %d x %d", ErrTooLarge, shnum, shentsize)
	}
	if shstrndx >= shnum || shentsize < 40 {
		return nil // elf.NewFile refuses it without reading a table
	}
	sh := make([]byte, 64)
	if n, _ := r.ReadAt(sh[:min(shentsize, 64)], int64(shoff+shstrndx*shentsize)); n < 40 {
		return ErrNotELF
	}
	size := uint64(o.Uint32(sh[20:]))
	if h[4] == 2 {
		size = o.Uint64(sh[32:])
	}
	if size > MaxSectionNames {
		return fmt.Errorf("%w: section names %d bytes", ErrTooLarge, size)
	}
	return nil
}

// SectionFits reports whether f has a section called name of at most limit bytes (checked
// before Section.Data, DynamicSymbols and the like read it whole).
func SectionFits(f *elf.File, name string, limit uint64) bool {
	s := f.Section(name)
	return s != nil && s.Size <= limit
}
