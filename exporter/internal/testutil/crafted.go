package testutil

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"testing"
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
	// Runnable adds an x86-64 code segment whose entry loops on pause(2): the file runs (as
	// a process that sleeps until killed) and reads as a Go binary.
	Runnable bool
}

// runnableCode is the entry of a Runnable CraftedELF: mov eax, 34 (pause); syscall; jmp back.
var runnableCode = []byte{0xb8, 0x22, 0, 0, 0, 0x0f, 0x05, 0xeb, 0xf7}

// Bytes lays the executable out: ELF header, one program header, the build info at 0x1000,
// then the section name table and three section headers (null, .go.buildinfo, .shstrtab).
func (c CraftedELF) Bytes() []byte {
	le := binary.LittleEndian
	const dataOff, vaddr = 0x1000, 0x500000
	const codeOff, codeVaddr = 0x800, 0x400000
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
	phnum := uint16(1)
	if c.Runnable {
		le.PutUint64(b[24:], codeVaddr+codeOff)
		phnum = 2
	}
	le.PutUint64(b[32:], 64) // phoff
	le.PutUint64(b[40:], shOff)
	le.PutUint16(b[52:], 64) // ehsize
	le.PutUint16(b[54:], 56) // phentsize
	le.PutUint16(b[56:], phnum)
	le.PutUint16(b[58:], 64) // shentsize
	shnum := uint16(3)
	if c.SectionCount != 0 {
		shnum = c.SectionCount
	}
	le.PutUint16(b[60:], shnum)
	le.PutUint16(b[62:], 2) // shstrndx
	ph := b[64:]
	if c.Runnable { // the code segment first: PT_LOAD segments ascend by address
		le.PutUint32(ph[0:], 1) // PT_LOAD
		le.PutUint32(ph[4:], 5) // PF_R|PF_X
		le.PutUint64(ph[16:], codeVaddr)
		le.PutUint64(ph[24:], codeVaddr)
		le.PutUint64(ph[32:], dataOff)
		le.PutUint64(ph[40:], dataOff)
		le.PutUint64(ph[48:], 0x1000)
		copy(b[codeOff:], runnableCode)
		ph = ph[56:]
	}
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

// The generators below make the crafted inputs of issue 29 ("bounded by construction"): inputs
// under every size cap whose parse or whose kept result was not bounded. The hostile-node test
// plants them through tenant processes; the parsers' tests assert the heap they cost.

// ReplaceSection returns a copy of the 64-bit little-endian ELF image img whose section
// called name holds content instead: content is appended (8-byte aligned) and the section
// header points at it. The loader reads program headers only, so a crafted executable still
// runs; tools and the exporter's parsers read the section headers.
func ReplaceSection(t testing.TB, img []byte, name string, content []byte) []byte {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatalf("ReplaceSection: %v", err)
	}
	i := slices.IndexFunc(f.Sections, func(s *elf.Section) bool { return s.Name == name })
	if i < 0 || f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB {
		t.Fatalf("ReplaceSection: no section %s in a 64-bit little-endian ELF image", name)
	}
	out := append([]byte(nil), img...)
	out = append(out, make([]byte, (8-len(out)%8)%8)...)
	off := len(out)
	out = append(out, content...)
	le := binary.LittleEndian
	sh := le.Uint64(out[40:]) + uint64(i)*uint64(le.Uint16(out[58:]))
	le.PutUint64(out[sh+24:], uint64(off))
	le.PutUint64(out[sh+32:], uint64(len(content)))
	return out
}

// CraftSymbols returns a copy of the 64-bit little-endian ELF image img whose symbol table
// (".dynsym" or ".symtab") holds symbols global functions, defined in the first section,
// that all name one string of nameLen bytes: its string table (the section the table links
// to) is replaced by that one string. 43 689 symbols naming a string of 1 MiB less two
// bytes keep both tables at 1 MiB; debug/elf's symbol readers copy the name per symbol
// (43 GiB).
func CraftSymbols(t testing.TB, img []byte, table string, symbols, nameLen int) []byte {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatalf("CraftSymbols: %v", err)
	}
	s := f.Section(table)
	if s == nil || int(s.Link) >= len(f.Sections) {
		t.Fatalf("CraftSymbols: no %s with a string table", table)
	}
	strtab := make([]byte, nameLen+2)
	for i := 1; i <= nameLen; i++ {
		strtab[i] = 'A'
	}
	syms := make([]byte, 24*(symbols+1))
	for i := 1; i <= symbols; i++ {
		e := syms[24*i:]
		binary.LittleEndian.PutUint32(e[0:], 1)                     // st_name
		e[4] = byte(elf.STB_GLOBAL)<<4 | byte(elf.STT_FUNC)         // st_info
		binary.LittleEndian.PutUint16(e[6:], 1)                     // st_shndx
		binary.LittleEndian.PutUint64(e[8:], uint64(0x400000+16*i)) // st_value
		binary.LittleEndian.PutUint64(e[16:], 16)                   // st_size
	}
	out := ReplaceSection(t, img, f.Sections[s.Link].Name, strtab)
	return ReplaceSection(t, out, table, syms)
}

// CraftedPclntab is a Go function table (.gopclntab) in the layout of one Go release, for a
// 64-bit little-endian target: Funcs first, from Text on, then Repeat more functions of 16
// bytes that all share one function record named "x.f" (a table that claims a million
// functions in 8 MiB: debug/gosym makes a Func and a Sym of each, 152 MiB).
type CraftedPclntab struct {
	Version int // 12 (Go 1.2-1.15), 116 (1.16-1.17), 118 (1.18-1.19) or 120 (1.20+)
	Text    uint64
	Funcs   []CraftedFunc
	Repeat  int
}

// CraftedFunc is one function of a CraftedPclntab.
type CraftedFunc struct {
	Name string
	Size uint64
}

// Bytes lays the table out as the linker of c.Version does (debug/gosym/pclntab.go reads it).
func (c CraftedPclntab) Bytes() []byte {
	le := binary.LittleEndian
	const ptr, funcSize = 8, 48 // pointer size; a _func record with room for what debug/gosym reads
	n := len(c.Funcs) + c.Repeat
	// Function names: NUL-terminated, each once.
	names := []byte{0}
	nameOff := map[string]uint32{}
	for _, f := range append(slices.Clone(c.Funcs), CraftedFunc{Name: "x.f"}) {
		if _, ok := nameOff[f.Name]; !ok {
			nameOff[f.Name] = uint32(len(names))
			names = append(append(names, f.Name...), 0)
		}
	}
	entries := make([]uint64, 0, n+1) // offsets from Text
	var at uint64
	for _, f := range c.Funcs {
		entries = append(entries, at)
		at += f.Size
	}
	for range c.Repeat {
		entries = append(entries, at)
		at += 16
	}
	entries = append(entries, at)
	field := 4 // functab field size
	if c.Version < 118 {
		field = ptr
	}
	functabSize := (2*n + 1) * field
	recs := len(c.Funcs) + 1 // one record per named function, one shared by the repeats
	align := func(x int) int { return (x + 7) &^ 7 }
	// Offsets in the table; funcdata and nametab are what record and name offsets count from.
	var header, namesAt, functabAt, recsAt, fileAt, funcdata, nametab int
	switch c.Version {
	case 12: // header, functab (then a uint32: the file table's offset), records, names, files
		header = 8 + ptr
		functabAt = header
		recsAt = align(functabAt + functabSize + 4)
		namesAt = recsAt + recs*funcSize
		fileAt = align(namesAt + len(names))
	case 116, 118, 120: // header, names, functab, records (functab and records are funcdata)
		header = 8 + 7*ptr
		if c.Version >= 118 {
			header = 8 + 8*ptr
		}
		namesAt = header
		functabAt = align(namesAt + len(names))
		recsAt = align(functabAt + functabSize)
		fileAt = recsAt + recs*funcSize
		funcdata, nametab = functabAt, namesAt
	default:
		panic("CraftedPclntab: unknown version")
	}
	b := make([]byte, fileAt+8)
	le.PutUint32(b[0:], map[int]uint32{12: 0xfffffffb, 116: 0xfffffffa, 118: 0xfffffff0, 120: 0xfffffff1}[c.Version])
	b[6], b[7] = 1, ptr // pc quantum, pointer size
	word := func(i int, v int) { le.PutUint64(b[8+i*ptr:], uint64(v)) }
	word(0, n) // nfunctab; the file count (word 1) stays 0
	switch c.Version {
	case 12:
		le.PutUint32(b[functabAt+functabSize:], uint32(fileAt))
		le.PutUint32(b[fileAt:], 1) // one file
	case 116: // funcnametab, cutab, filetab, pctab (all at the names), funcdata
		for i := 2; i <= 5; i++ {
			word(i, namesAt)
		}
		word(6, functabAt)
	default: // textStart, funcnametab, cutab, filetab, pctab, funcdata
		le.PutUint64(b[8+2*ptr:], c.Text)
		for i := 3; i <= 6; i++ {
			word(i, namesAt)
		}
		word(7, functabAt)
	}
	copy(b[namesAt:], names)
	put := func(off int, v uint64) {
		if field == 4 {
			le.PutUint32(b[off:], uint32(v))
		} else {
			le.PutUint64(b[off:], v)
		}
	}
	pc := func(i int) uint64 {
		if c.Version >= 118 {
			return entries[i]
		}
		return c.Text + entries[i]
	}
	rec := func(r int) int { return recsAt + r*funcSize }
	for i := range n {
		r := min(i, len(c.Funcs)) // the repeats share the last record
		put(functabAt+2*i*field, pc(i))
		put(functabAt+(2*i+1)*field, uint64(rec(r)-funcdata))
	}
	put(functabAt+2*n*field, pc(n))
	for r := range recs {
		name := "x.f"
		if r < len(c.Funcs) {
			name = c.Funcs[r].Name
		}
		at, nameRel := rec(r), nameOff[name]+uint32(namesAt-nametab)
		if c.Version >= 118 {
			le.PutUint32(b[at:], uint32(entries[min(r, n)]))
			le.PutUint32(b[at+4:], nameRel)
		} else {
			le.PutUint64(b[at:], pc(min(r, n)))
			le.PutUint32(b[at+ptr:], nameRel)
		}
	}
	return b
}

// CraftedModuleText is Go build info module text of almost size bytes (keep it under the
// readers' 1 MiB cap), most of it a main module path (runtime/debug.ParseBuildInfo returns
// substrings of its input: a kept path pinned the whole text), with go.uber.org/automaxprocs
// among the deps and a long DefaultGODEBUG that ends with containermaxprocs=0.
func CraftedModuleText(size int) string {
	godebug := strings.Repeat("x=1,", 2000) + "containermaxprocs=0"
	path := "example.com/" + strings.Repeat("a", max(1, (size-len(godebug)-256)/2))
	return "path\t" + path + "\nmod\t" + path + "\t(devel)\t\ndep\tgo.uber.org/automaxprocs\tv1.6.0\th1:x=\n" +
		"build\tDefaultGODEBUG=" + godebug + "\n"
}

// CraftedPerfData is a HotSpot perf data file (little-endian, version 2.0) of Entries tiny
// entries ("e0", "e1", ...: a name and no value, 26 bytes each: 40 000 in 1 MiB), optionally
// with the VM start-time counter sun.rt.createVmBeginTime (ms since the epoch) and the
// counters the exporter reads first, as a JVM writes them.
type CraftedPerfData struct {
	Entries int
	// VMStartMillis, when set, adds sun.rt.createVmBeginTime and sun.os.hrt.frequency.
	VMStartMillis int64
	// Padding pads the file (with zeros after the entries) to this many bytes.
	Padding int
}

// Bytes lays the file out.
func (c CraftedPerfData) Bytes() []byte {
	le := binary.LittleEndian
	b := make([]byte, 32, max(32+26*c.Entries+128, c.Padding))
	entry := func(name string, typ byte, value []byte) {
		nameOff := 20
		dataOff := nameOff + len(name) + 1
		length := dataOff + len(value)
		e := make([]byte, length)
		le.PutUint32(e[0:], uint32(length))
		le.PutUint32(e[4:], uint32(nameOff))
		if typ == 'B' {
			le.PutUint32(e[8:], uint32(len(value)))
		}
		e[12], e[14], e[15] = typ, 1, 1 // type, units none, constant
		le.PutUint32(e[16:], uint32(dataOff))
		copy(e[nameOff:], name)
		copy(e[dataOff:], value)
		b = append(b, e...)
	}
	n := 0
	if c.VMStartMillis != 0 {
		entry("sun.os.hrt.frequency", 'J', le.AppendUint64(nil, 1e9))
		entry("sun.rt.createVmBeginTime", 'J', le.AppendUint64(nil, uint64(c.VMStartMillis)))
		n += 2
	}
	for i := range c.Entries {
		entry("e"+strconv.FormatInt(int64(i), 36), 'B', nil)
		n++
	}
	used := len(b)
	if c.Padding > len(b) {
		b = append(b, make([]byte, c.Padding-len(b))...)
	}
	copy(b, []byte{0xCA, 0xFE, 0xC0, 0xC0, 1, 2, 0, 1}) // magic, little-endian, 2.0, accessible
	le.PutUint32(b[8:], uint32(used))
	le.PutUint64(b[16:], 1) // mod time stamp
	le.PutUint32(b[24:], 32)
	le.PutUint32(b[28:], uint32(n))
	return b
}
