// Package crafted makes the files a hostile tenant plants for a root exporter (issue 29): real
// executables whose section headers claim huge tables (the loader ignores section headers, so
// they still run), a Go executable whose build info carries a ~1 MiB module path, and HotSpot
// perf data files of tens of thousands of tiny entries. Each starts from a real program and
// changes only what the kernel and the dynamic loader do not read.
package crafted

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

var le = binary.LittleEndian

// ELF offsets of a 64-bit header, program header and section header.
const (
	ehPhoff, ehShoff, ehPhentsize, ehPhnum, ehShentsize, ehShnum, ehShstrndx = 32, 40, 54, 56, 58, 60, 62
	phSize, shSize                                                           = 56, 64
	shOffset, shAddr, shSizeField, shLink                                    = 24, 16, 32, 40
)

// ELF is a 64-bit little-endian executable being rewritten.
type ELF struct{ b []byte }

// Load reads an executable (x86-64 or arm64, 64-bit little-endian, with section headers).
func Load(path string) (*ELF, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 64 || !bytes.HasPrefix(b, []byte("\x7fELF\x02\x01")) {
		return nil, fmt.Errorf("%s: not a 64-bit little-endian ELF file", path)
	}
	if le.Uint16(b[ehShentsize:]) != shSize || le.Uint16(b[ehPhentsize:]) != phSize {
		return nil, fmt.Errorf("%s: unexpected header sizes", path)
	}
	return &ELF{b: b}, nil
}

// Bytes is the rewritten file.
func (e *ELF) Bytes() []byte { return e.b }

// Write writes the file, executable.
func (e *ELF) Write(path string) error { return os.WriteFile(path, e.b, 0o755) }

// section is the header of the named section (a slice of the file: writes change it).
func (e *ELF) section(name string) ([]byte, error) {
	shoff := le.Uint64(e.b[ehShoff:])
	n := int(le.Uint16(e.b[ehShnum:]))
	str := e.sectionAt(shoff, int(le.Uint16(e.b[ehShstrndx:])))
	names := e.b[le.Uint64(str[shOffset:]):][:le.Uint64(str[shSizeField:])]
	for i := range n {
		h := e.sectionAt(shoff, i)
		off := le.Uint32(h)
		if int(off) < len(names) {
			if end := bytes.IndexByte(names[off:], 0); end >= 0 && string(names[off:int(off)+end]) == name {
				return h, nil
			}
		}
	}
	return nil, fmt.Errorf("no section %s", name)
}

func (e *ELF) sectionAt(shoff uint64, i int) []byte {
	return e.b[shoff+uint64(i)*shSize:][:shSize]
}

// appendAligned appends data at the next multiple of align and returns its file offset.
func (e *ELF) appendAligned(data []byte, align int) uint64 {
	for len(e.b)%align != 0 {
		e.b = append(e.b, 0)
	}
	off := uint64(len(e.b))
	e.b = append(e.b, data...)
	return off
}

// pointSection makes the named section's header describe size bytes at file offset off.
func (e *ELF) pointSection(name string, off, size uint64) error {
	h, err := e.section(name)
	if err != nil {
		return err
	}
	le.PutUint64(h[shOffset:], off)
	le.PutUint64(h[shSizeField:], size)
	return nil
}

// BloatSymbols points a symbol table section (.dynsym or .symtab) and its string table at
// count symbols that all name one string of nameLen bytes: what debug/elf's Symbols and
// DynamicSymbols turn into count copies of that string. The tables the loader uses (through
// PT_DYNAMIC) are not touched, so the program still runs.
func (e *ELF) BloatSymbols(symtab string, count, nameLen int) error {
	h, err := e.section(symtab)
	if err != nil {
		return err
	}
	link := le.Uint32(h[shLink:])
	shoff := le.Uint64(e.b[ehShoff:])
	if int(link) >= int(le.Uint16(e.b[ehShnum:])) || link == 0 {
		return fmt.Errorf("%s links no string table", symtab)
	}
	strs := make([]byte, nameLen+2) // a leading NUL (the empty name), the name, its NUL
	for i := 1; i <= nameLen; i++ {
		strs[i] = 'A'
	}
	syms := make([]byte, 24*count)
	for i := 1; i < count; i++ { // symbol 0 is the null symbol
		s := syms[24*i:]
		le.PutUint32(s[0:], 1)                              // st_name: the long name
		s[4] = byte(elf.STB_GLOBAL)<<4 | byte(elf.STT_FUNC) // st_info
		le.PutUint16(s[6:], 1)                              // st_shndx: a defined symbol
		le.PutUint64(s[8:], 0x1000+uint64(i))               // st_value
		le.PutUint64(s[16:], 1)                             // st_size
	}
	strOff := e.appendAligned(strs, 8)
	str := e.sectionAt(shoff, int(link))
	le.PutUint64(str[shOffset:], strOff)
	le.PutUint64(str[shSizeField:], uint64(len(strs)))
	symOff := e.appendAligned(syms, 8)
	h, _ = e.section(symtab) // appending may have moved the file's bytes
	le.PutUint64(h[shOffset:], symOff)
	le.PutUint64(h[shSizeField:], uint64(len(syms)))
	return nil
}

// MoveSectionHeaders copies the section header table gap bytes past the end of the file and
// points the ELF header at the copy: a reader of the section headers then reads far from
// anything the loader or a page fault's readahead touches (the stuck-read executables serve
// that range from a FUSE server that never answers).
func (e *ELF) MoveSectionHeaders(gap int) {
	shoff := le.Uint64(e.b[ehShoff:])
	table := append([]byte(nil), e.b[shoff:shoff+uint64(le.Uint16(e.b[ehShnum:]))*shSize]...)
	e.b = append(e.b, make([]byte, gap)...)
	le.PutUint64(e.b[ehShoff:], e.appendAligned(table, 4096))
}

// LoadEnd is where the file contents of the last PT_LOAD segment end: what running the
// program can read of the file.
func (e *ELF) LoadEnd() uint64 {
	var end uint64
	phoff := le.Uint64(e.b[ehPhoff:])
	for i := range int(le.Uint16(e.b[ehPhnum:])) {
		p := e.b[phoff+uint64(i)*phSize:]
		if elf.ProgType(le.Uint32(p)) == elf.PT_LOAD {
			end = max(end, le.Uint64(p[8:])+le.Uint64(p[32:]))
		}
	}
	return end
}

// addLoad turns the PT_NOTE program header (a Go executable's build id note, which nothing
// reads at run time) into a read-only PT_LOAD of data, mapped above every other segment, and
// moves it right after the last PT_LOAD so the PT_LOAD headers stay sorted by address (and
// before GNU_STACK, whose empty range debug/buildinfo's lookup would take for any address).
// It returns the data's virtual address and file offset.
func (e *ELF) addLoad(data []byte) (vaddr, off uint64, err error) {
	phoff := le.Uint64(e.b[ehPhoff:])
	n := int(le.Uint16(e.b[ehPhnum:]))
	var hdrs [][]byte
	note := -1
	var top uint64
	for i := range n {
		p := append([]byte(nil), e.b[phoff+uint64(i)*phSize:][:phSize]...)
		switch elf.ProgType(le.Uint32(p)) {
		case elf.PT_NOTE:
			if note < 0 {
				note = i
				continue
			}
		case elf.PT_LOAD:
			top = max(top, le.Uint64(p[16:])+le.Uint64(p[40:]))
		}
		hdrs = append(hdrs, p)
	}
	if note < 0 {
		return 0, 0, errors.New("no PT_NOTE program header to reuse")
	}
	off = e.appendAligned(data, 4096)
	vaddr = (top + 1<<30) &^ (1<<30 - 1) // the next GiB boundary above every segment
	ph := make([]byte, phSize)
	le.PutUint32(ph[0:], uint32(elf.PT_LOAD))
	le.PutUint32(ph[4:], uint32(elf.PF_R))
	le.PutUint64(ph[8:], off)
	le.PutUint64(ph[16:], vaddr)
	le.PutUint64(ph[24:], vaddr)
	le.PutUint64(ph[32:], uint64(len(data)))
	le.PutUint64(ph[40:], uint64(len(data)))
	le.PutUint64(ph[48:], 4096)
	last := 0
	for i, p := range hdrs {
		if elf.ProgType(le.Uint32(p)) == elf.PT_LOAD {
			last = i
		}
	}
	hdrs = append(hdrs[:last+1], append([][]byte{ph}, hdrs[last+1:]...)...)
	for i, p := range hdrs {
		copy(e.b[phoff+uint64(i)*phSize:], p)
	}
	return vaddr, off, nil
}

// Go build info framing, as cmd/go and the linker write it (Go 1.18+: inline strings).
const (
	buildInfoMagic = "\xff Go buildinf:"
	modInfoStart   = "0w\xaf\x0c\x92t\b\x02A\xe1\xc1\a\xe6\xd6\x18\xe6"
	modInfoEnd     = "\xf92C1\x86\x18 r\x00\x82B\x10A\x16\xd8\xf2"
)

// MaxModInfo is the module text the exporter reads at most (1 MiB, its cap).
const MaxModInfo = 1 << 20

// SetGoBuildInfo gives a Go executable new build info: Go version goVersion and a main
// module whose path is pathLen bytes, in a segment of its own that .go.buildinfo's section
// header now points at. The runtime keeps its own copy of the build info, so the program
// runs as before; readers of the file (debug/buildinfo, the exporter) see the new one.
func (e *ELF) SetGoBuildInfo(goVersion string, pathLen int) error {
	path := bytes.Repeat([]byte("m"), pathLen)
	path[0] = 'x' // an arbitrary module path, ~1 MiB of it
	mod := modInfoStart + "path\tmain\nmod\t" + string(path) + "\t(devel)\t\n" + modInfoEnd
	if len(mod) > MaxModInfo {
		return fmt.Errorf("module text of %d bytes is above the %d a reader accepts", len(mod), MaxModInfo)
	}
	blob := []byte(buildInfoMagic)
	blob = append(blob, 8, 2) // pointer size, flags: inline strings
	blob = append(blob, make([]byte, 32-len(blob))...)
	blob = binary.AppendUvarint(blob, uint64(len(goVersion)))
	blob = append(blob, goVersion...)
	blob = binary.AppendUvarint(blob, uint64(len(mod)))
	blob = append(blob, mod...)
	vaddr, off, err := e.addLoad(blob)
	if err != nil {
		return err
	}
	h, err := e.section(".go.buildinfo")
	if err != nil {
		return err
	}
	le.PutUint64(h[shAddr:], vaddr)
	le.PutUint64(h[shOffset:], off)
	le.PutUint64(h[shSizeField:], uint64(len(blob)))
	return nil
}
