package testutil

import (
	"encoding/binary"
)

// CraftedELF describes a minimal 64-bit little-endian ELF executable that carries Go build
// info the way the Go linker writes it (a .go.buildinfo section at the start of a writable
// PT_LOAD segment), with knobs a hostile tenant would turn.
type CraftedELF struct {
	GoVersion string // "" for none
	ModInfo   string // module text (path/mod/dep lines), framed as the linker does
	// ModLen, when set, replaces the module text's varint length (a lie: 900 MiB, ...).
	ModLen uint64
	// SectionCount, when set, replaces e_shnum (e.g. 65535 headers the file does not hold).
	SectionCount uint16
	// NamesSize, when set, replaces the section name table's size (e.g. 1 GiB).
	NamesSize uint64
}

// Bytes lays the executable out: ELF header, one program header, the build info at 0x1000,
// then the section name table and three section headers (null, .go.buildinfo, .shstrtab).
func (c CraftedELF) Bytes() []byte {
	le := binary.LittleEndian
	const dataOff, vaddr = 0x1000, 0x500000
	var data []byte
	if c.GoVersion != "" {
		data = append([]byte("\xff Go buildinf:"), 8, 2)
		data = append(data, make([]byte, 16)...)
		data = binary.AppendUvarint(data, uint64(len(c.GoVersion)))
		data = append(data, c.GoVersion...)
		mod := "0w\xaf\x0c\x92t\b\x02A\xe1\xc1\a\xe6\xd6\x18\xe6" + c.ModInfo + "\xf92C1\x86\x18 r\x00\x82B\x10A\x16\xd8\xf2"
		n := uint64(len(mod))
		if c.ModLen != 0 {
			n = c.ModLen
		}
		data = binary.AppendUvarint(data, n)
		data = append(data, mod...)
	}
	names := []byte("\x00.go.buildinfo\x00.shstrtab\x00")
	namesOff := uint64(dataOff + len(data))
	shOff := (namesOff + uint64(len(names)) + 7) &^ 7
	b := make([]byte, shOff+3*64)
	copy(b, "\x7fELF\x02\x01\x01")
	le.PutUint16(b[16:], 2)  // ET_EXEC
	le.PutUint16(b[18:], 62) // x86-64
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[24:], vaddr) // entry
	le.PutUint64(b[32:], 64)    // phoff
	le.PutUint64(b[40:], shOff)
	le.PutUint16(b[52:], 64) // ehsize
	le.PutUint16(b[54:], 56) // phentsize
	le.PutUint16(b[56:], 1)  // phnum
	le.PutUint16(b[58:], 64) // shentsize
	shnum := uint16(3)
	if c.SectionCount != 0 {
		shnum = c.SectionCount
	}
	le.PutUint16(b[60:], shnum)
	le.PutUint16(b[62:], 2) // shstrndx
	ph := b[64:]
	le.PutUint32(ph[0:], 1) // PT_LOAD
	le.PutUint32(ph[4:], 6) // PF_R|PF_W
	le.PutUint64(ph[8:], dataOff)
	le.PutUint64(ph[16:], vaddr)
	le.PutUint64(ph[24:], vaddr)
	le.PutUint64(ph[32:], uint64(len(data)))
	le.PutUint64(ph[40:], uint64(len(data)))
	le.PutUint64(ph[48:], 0x1000)
	copy(b[dataOff:], data)
	copy(b[namesOff:], names)
	sh := b[shOff:]
	// [1] .go.buildinfo
	le.PutUint32(sh[64+0:], 1)
	le.PutUint32(sh[64+4:], 1) // PROGBITS
	le.PutUint64(sh[64+8:], 3) // WRITE|ALLOC
	le.PutUint64(sh[64+16:], vaddr)
	le.PutUint64(sh[64+24:], dataOff)
	le.PutUint64(sh[64+32:], uint64(len(data)))
	// [2] .shstrtab
	le.PutUint32(sh[128+0:], 15)
	le.PutUint32(sh[128+4:], 3) // STRTAB
	le.PutUint64(sh[128+24:], namesOff)
	ns := uint64(len(names))
	if c.NamesSize != 0 {
		ns = c.NamesSize
	}
	le.PutUint64(sh[128+32:], ns)
	return b
}
