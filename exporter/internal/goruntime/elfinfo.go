package goruntime

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/quota-exporter/quota_exporter/exporter/internal/elfscan"
	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// Build info is read from every watched process's executable, a file the tenant controls.
// debug/buildinfo (through debug/elf) reads the whole section and program header tables and
// the section name table at whatever size the file claims, and runtime/debug.ParseBuildInfo
// returns substrings of the module text, so a kept module path pins the whole text (up to
// 1 MiB per process). So the headers are read by package elfscan, the module text is
// streamed line by line through one buffer, and only what the rules read is kept, each
// string a capped copy. Every cap is far above what any Go toolchain writes.
const (
	// MaxBinarySize: larger executables are not inspected (reported as a parse error); see
	// elfscan.MaxBinarySize.
	MaxBinarySize = elfscan.MaxBinarySize
	// maxScan is how far into the data segment the build info blob is looked for when there
	// are no section headers: the linker puts it first.
	maxScan = 64 << 10
	// maxVersion caps the toolchain version string ("go1.26.8", "devel ...").
	maxVersion = 1 << 10
	// maxModInfo caps the module text (kubelet's is ~30 KiB: one line per dependency).
	maxModInfo = 1 << 20
	// maxLine caps a line of the module text that is looked at (a dependency line is ~100
	// bytes, DefaultGODEBUG ~1 KiB); longer lines are skipped.
	maxLine = 16 << 10
)

// godebugKeys are the DefaultGODEBUG settings the rules read (Compute); Build keeps no other.
var godebugKeys = []string{"containermaxprocs", "updatemaxprocs"}

var (
	buildInfoMagic = []byte("\xff Go buildinf:")
	errNotGo       = errors.New("not a Go executable")
)

// Build is what is kept of a Go executable's build info: small, whatever the file holds, and
// shared by every process of one executable (see execache).
type Build struct {
	Go             bool   // false: not a Go executable (or no build info found)
	GoVersion      string // toolchain, capped like a label value
	MainModule     string // main module path, capped like a label value
	DefaultGODEBUG string // only the godebugKeys settings, each at its last valid value
	AutoMaxProcs   bool   // go.uber.org/automaxprocs is among the deps
}

// ReadBuild reads the build info of a Go executable through r. A file that is not a Go
// executable, or a malformed one (it cannot be told from a non-Go one that happens to hold
// the magic), is Build{} with a nil error; I/O errors are returned. It allocates a bounded
// amount (header tables at their caps, the scan, one line buffer), whatever r holds; gopause
// uses it too, on the file it attaches through.
func ReadBuild(r io.ReaderAt) (Build, error) {
	b, err := parseBuild(r)
	if errors.Is(err, errNotGo) || errors.Is(err, elfscan.ErrNotELF) || errors.Is(err, elfscan.ErrTooLarge) {
		return Build{}, nil
	}
	return b, err
}

func parseBuild(r io.ReaderAt) (Build, error) {
	f, err := elfscan.NewFile(r)
	if err != nil {
		return Build{}, err
	}
	return buildOf(f)
}

// BuildOf is ReadBuild on an executable whose headers were read already.
func BuildOf(f *elfscan.File) (Build, error) {
	b, err := buildOf(f)
	if errors.Is(err, errNotGo) || errors.Is(err, elfscan.ErrNotELF) || errors.Is(err, elfscan.ErrTooLarge) {
		return Build{}, nil
	}
	return b, err
}

func buildOf(f *elfscan.File) (Build, error) {
	start, size, err := buildInfoRange(f)
	if err != nil {
		return Build{}, err
	}
	// The blob is 16-byte aligned, at the start of .go.buildinfo or near the start of the
	// first writable data segment.
	scan, err := f.ReadAddr(start, min(size, maxScan))
	if err != nil {
		return Build{}, err
	}
	at := -1
	for i := 0; i+32 <= len(scan); i += 16 {
		if bytes.HasPrefix(scan[i:], buildInfoMagic) {
			at = i
			break
		}
	}
	if at < 0 {
		return Build{}, errNotGo
	}
	hdr := scan[at : at+32]
	addr := start + uint64(at)
	ptrSize, flags := int(hdr[14]), hdr[15]
	var vers string
	var modAddr, modLen uint64
	if flags&2 != 0 { // Go 1.18+: two varint-prefixed strings after the header
		var verAddr, verLen uint64
		if verAddr, verLen, err = varString(f, addr+32, maxVersion); err != nil {
			return Build{}, err
		}
		if vers, err = readString(f, verAddr, verLen); err != nil {
			return Build{}, err
		}
		if modAddr, modLen, err = varString(f, verAddr+verLen, maxModInfo); err != nil {
			return Build{}, err
		}
	} else { // before Go 1.18: pointers to two Go string headers
		var order binary.ByteOrder = binary.LittleEndian
		if flags&1 != 0 {
			order = binary.BigEndian
		}
		if ptrSize != 4 && ptrSize != 8 {
			return Build{}, errNotGo
		}
		ptr := func(b []byte) uint64 {
			if ptrSize == 4 {
				return uint64(order.Uint32(b))
			}
			return order.Uint64(b)
		}
		verAddr, verLen := goString(f, ptr(hdr[16:]), ptrSize, ptr, maxVersion)
		vers, _ = readString(f, verAddr, verLen)
		modAddr, modLen = goString(f, ptr(hdr[16+ptrSize:]), ptrSize, ptr, maxModInfo)
	}
	if vers == "" {
		return Build{}, errNotGo
	}
	b := Build{Go: true, GoVersion: tenantstr.Keep(vers)}
	// The module text is framed by 16-byte sentinels, the last preceded by a newline (as
	// debug/buildinfo strips them); without them there is no module text.
	if modLen >= 33 {
		if nl, err := f.ReadAddr(modAddr+modLen-17, 1); err == nil && len(nl) == 1 && nl[0] == '\n' {
			if err := b.readModules(f, modAddr+16, modLen-32); err != nil {
				return Build{}, err
			}
		}
	}
	return b, nil
}

// buildInfoRange finds where the build info should be: the .go.buildinfo section, else the
// first writable, non-executable PT_LOAD segment. It returns that range's virtual address
// and size.
func buildInfoRange(f *elfscan.File) (addr, size uint64, err error) {
	if s := f.Section(".go.buildinfo"); s != nil && s.Size > 0 {
		return s.Addr, s.Size, nil
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&(elf.PF_X|elf.PF_W) == elf.PF_W && p.Filesz > 0 {
			return p.Vaddr, p.Filesz, nil
		}
	}
	return 0, 0, errNotGo
}

// readString reads n bytes (n capped by the caller) at addr as a string.
func readString(f *elfscan.File, addr, n uint64) (string, error) {
	s, err := f.ReadAddr(addr, n)
	if err != nil || uint64(len(s)) < n {
		return "", errNotGo
	}
	return string(s), nil
}

// varString reads the uvarint length of a string at addr and returns where the string's
// bytes are, if they are at most limit and lie in one segment.
func varString(f *elfscan.File, addr, limit uint64) (at, n uint64, err error) {
	b, err := f.ReadAddr(addr, binary.MaxVarintLen64)
	if err != nil {
		return 0, 0, err
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > limit {
		return 0, 0, errNotGo
	}
	if _, _, avail, ok := f.Segment(addr+uint64(k), 0); !ok || avail < n {
		return 0, 0, errNotGo
	}
	return addr + uint64(k), n, nil
}

// goString reads a Go string header (pointer, length) at addr and returns where the string
// is; (0, 0) when anything is off or the string is longer than limit or leaves its segment.
func goString(f *elfscan.File, addr uint64, ptrSize int, ptr func([]byte) uint64, limit uint64) (uint64, uint64) {
	h, err := f.ReadAddr(addr, uint64(2*ptrSize))
	if err != nil || len(h) < 2*ptrSize {
		return 0, 0
	}
	data, n := ptr(h), ptr(h[ptrSize:])
	if n > limit {
		return 0, 0
	}
	if _, _, avail, ok := f.Segment(data, 0); !ok || avail < n {
		return 0, 0
	}
	return data, n
}

// readModules streams the module text (n bytes at addr, within one segment) line by line
// through one maxLine buffer and keeps what the rules read: the main module path, whether
// automaxprocs is a dependency, the DefaultGODEBUG settings in godebugKeys. Lines are read
// as runtime/debug.ParseBuildInfo reads them; a line longer than maxLine is skipped, and a
// malformed line tells nothing (ParseBuildInfo would refuse the whole text).
func (b *Build) readModules(f *elfscan.File, addr, n uint64) error {
	_, off, _, ok := f.Segment(addr, 0)
	if !ok {
		return errNotGo
	}
	w := elfscan.NewWindow(f.Reader(), off, n, maxLine+1)
	godebug := make([]int64, len(godebugKeys)) // last valid value of each key; -1<<63: none
	for i := range godebug {
		godebug[i] = -1 << 63
	}
	for pos := uint64(0); pos < n; {
		chunk, err := w.Bytes(pos, maxLine+1)
		if err != nil {
			return err
		}
		nl := bytes.IndexByte(chunk, '\n')
		if nl < 0 {
			if uint64(len(chunk)) < maxLine+1 {
				break // the last line has no newline: ParseBuildInfo ignores it too
			}
			// A line longer than maxLine: skip to its end.
			for pos += uint64(len(chunk)); pos < n; pos += uint64(len(chunk)) {
				if chunk, err = w.Bytes(pos, maxLine+1); err != nil {
					return err
				}
				if len(chunk) == 0 {
					return nil // the file ends before the segment says
				}
				if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
					pos += uint64(i) + 1
					break
				}
			}
			continue
		}
		b.line(chunk[:nl], godebug)
		pos += uint64(nl) + 1
	}
	var kept []string
	for i, k := range godebugKeys {
		if godebug[i] != -1<<63 {
			kept = append(kept, k+"="+strconv.FormatInt(godebug[i], 10))
		}
	}
	b.DefaultGODEBUG = strings.Join(kept, ",")
	return nil
}

// line takes in one line of the module text (valid until the next read of the window).
func (b *Build) line(line []byte, godebug []int64) {
	switch {
	case bytes.HasPrefix(line, []byte("mod\t")):
		rest := line[len("mod\t"):]
		if cols := bytes.Count(rest, []byte("\t")) + 1; cols == 2 || cols == 3 {
			path, _, _ := bytes.Cut(rest, []byte("\t"))
			b.MainModule = tenantstr.Keep(string(path))
		}
	case bytes.HasPrefix(line, []byte("dep\t")):
		path, _, _ := bytes.Cut(line[len("dep\t"):], []byte("\t"))
		if string(path) == AutoMaxProcsModule {
			b.AutoMaxProcs = true
		}
	case bytes.HasPrefix(line, []byte("build\t")):
		kv := line[len("build\t"):]
		var v []byte
		for _, key := range []string{"DefaultGODEBUG=", `"DefaultGODEBUG"=`, "`DefaultGODEBUG`="} {
			if rest, ok := bytes.CutPrefix(kv, []byte(key)); ok {
				v = rest
				break
			}
		}
		if v == nil {
			return
		}
		if len(v) > 0 && (v[0] == '"' || v[0] == '`') {
			u, err := strconv.Unquote(string(v))
			if err != nil {
				return
			}
			v = []byte(u)
		}
		// The last DefaultGODEBUG line is the one; in it each setting as GODEBUGInt applies
		// it: later wins, a value that is no int32 is skipped.
		for i := range godebug {
			godebug[i] = -1 << 63
		}
		for field := range bytes.SplitSeq(v, []byte(",")) {
			k, val, ok := bytes.Cut(field, []byte("="))
			if !ok {
				continue
			}
			for i, key := range godebugKeys {
				if string(k) == key {
					if n, err := strconv.ParseInt(string(val), 10, 32); err == nil {
						godebug[i] = n
					}
				}
			}
		}
	}
}
