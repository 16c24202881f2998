package malloc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

var mapsSeed = []string{
	"55d0c2a4a000-55d0c2a4c000 r--p 00000000 fd:01 1311 /usr/bin/cat\n",
	"7f1c00000000-7f1c00021000 rw-p 00000000 00:00 0 \n7f1c00021000-7f1c04000000 ---p 00000000 00:00 0 \n",
	"7f1c3c000000-7f1c40000000 rw-p 00000000 00:00 0   [anon: glibc: malloc arena]\n",
	"7ffd1a0e5000-7ffd1a106000 rw-p 00000000 00:00 0                          [stack]\n",
	"7f00-7e00 rw-p 0 00:00 0\n", "zzzz-1 rw-p 0 0 0\n", "1-2 rw 0 0 0\n", "1-2 rw-p 0 0\n",
	"ffffffffffffffff-ffffffffffffffff rw-p 00000000 00:00 0 \n", "7f00-7f01 rw-p 0 0:0 12 /a b (deleted)",
}

// Allocation bounds of the fuzz targets. Production streams maps and smaps through one
// maxLine buffer (scanMaps, smapsEntries) keeping a bounded summary; ParseMaps and
// ParseSmapsRss, which keep an entry per line of a whole file, are checked on inputs of up
// to maxFuzzWhole bytes. The rest parse a few words or numbers.
const (
	smallParseAlloc = 16 << 10
	maxFuzzWhole    = maxLine
	maxWholeAlloc   = 64 * maxFuzzWhole
	maxScanAlloc    = 64 << 10
)

func FuzzParseMaps(f *testing.F) {
	for _, s := range mapsSeed {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzWhole {
			return
		}
		var maps []Mapping
		testutil.AllocBound(t, maxWholeAlloc, func() { maps = ParseMaps(b) })
		for _, m := range maps {
			if m.End < m.Start || len(m.Perms) != 4 {
				t.Fatalf("bad mapping %+v", m)
			}
		}
		for _, a := range candidates(maps, 64) {
			if a%HeapMaxSize != 0 {
				t.Fatalf("unaligned candidate %#x", a)
			}
		}
		for _, r := range heuristicHeaps(maps) {
			if r.End-r.Start != HeapMaxSize {
				t.Fatalf("bad heuristic heap %+v", r)
			}
		}
		_ = ParseSmapsRss(b)
	})
}

func FuzzParseSmapsRss(f *testing.F) {
	f.Add([]byte("7f1c00000000-7f1c00021000 rw-p 00000000 00:00 0 \nSize: 132 kB\nRss:   8 kB\n"))
	f.Add([]byte("Rss: 5 kB\n"))
	f.Add([]byte("0-1000 rw-p 0 0:0 0\nRss: 99999999999999999999 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzWhole {
			return
		}
		var e []SmapsEntry
		testutil.AllocBound(t, maxWholeAlloc, func() { e = ParseSmapsRss(b) })
		_ = residentIn(e, []Range{{0, 1 << 40}, {1 << 40, 1 << 63}})
	})
}

func hdr(ar, prev, size, mprot uint64) []byte {
	b := make([]byte, headerSize)
	binary.LittleEndian.PutUint64(b[0:], ar)
	binary.LittleEndian.PutUint64(b[8:], prev)
	binary.LittleEndian.PutUint64(b[16:], size)
	binary.LittleEndian.PutUint64(b[24:], mprot)
	return b
}

func FuzzHeader(f *testing.F) {
	const a = 0x7f1c00000000
	f.Add(uint64(a), hdr(a+48, 0, 0x21000, 0x21000), uint64(a+HeapMaxSize), hdr(a+48, a, 0x1000, 0x2000))
	f.Add(uint64(a), hdr(a+32, 0, HeapMaxSize, HeapMaxSize), uint64(a+HeapMaxSize), hdr(a+32, a, 0x3000, 0x3000))
	f.Add(uint64(a), make([]byte, 32), uint64(0), []byte{1, 2, 3})
	f.Add(uint64(1<<64-HeapMaxSize), hdr(1<<64-16, 0, 4096, 4096), uint64(a), hdr(a, a, 4096, 4096))
	f.Fuzz(func(t *testing.T, a1 uint64, b1 []byte, a2 uint64, b2 []byte) {
		var cands, heaps []Header
		var arenas int
		testutil.AllocBound(t, smallParseAlloc, func() {
			for _, c := range []struct {
				a uint64
				b []byte
			}{{a1, b1}, {a2, b2}} {
				if h, ok := ParseHeader(c.a, c.b); ok {
					cands = append(cands, h)
				}
			}
			heaps, arenas = Validate(cands)
		})
		if arenas > len(heaps) {
			t.Fatalf("arenas %d > heaps %d", arenas, len(heaps))
		}
		for _, h := range heaps {
			if !h.Plausible() || h.Size > h.MprotectSize || h.MprotectSize > HeapMaxSize {
				t.Fatalf("accepted bad header %+v", h)
			}
		}
	})
}

func FuzzTunables(f *testing.F) {
	for _, s := range []string{"2", "0", "0x10", "010", " +7abc", "-1", "", "99999999999999999999999", "glibc.malloc.arena_max=3:glibc.malloc.arena_test=1", "0-3,8,10-11"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v uint64
		var ok bool
		testutil.AllocBound(t, smallParseAlloc, func() { v, ok = parseTunableNum(s) })
		if ok && v < 1 {
			t.Fatalf("accepted %d", v)
		}
		max, test, _ := tunables(map[string]string{"GLIBC_TUNABLES": s, "MALLOC_ARENA_MAX": s, "MALLOC_ARENA_TEST": s})
		_, _ = max, test
		if n := countCPUList(s); n < 0 {
			t.Fatalf("negative cpu count %d", n)
		}
	})
}

func TestUnitRules(t *testing.T) {
	for s, want := range map[string]uint64{"2": 2, "0": 0, "0x10": 16, "010": 8, " +7abc": 7, "-1": 0, "x": 0} {
		if v, _ := parseTunableNum(s); v != want {
			t.Errorf("parseTunableNum(%q) = %d, want %d", s, v, want)
		}
	}
	max, _, src := tunables(map[string]string{"MALLOC_ARENA_MAX": "2", "GLIBC_TUNABLES": "glibc.malloc.check=1:glibc.malloc.arena_max=3"})
	if max != 3 || src != SourceTunable {
		t.Errorf("tunables: %d %s", max, src)
	}
	if n := countCPUList("0-3,8,10-11"); n != 7 {
		t.Errorf("countCPUList = %d", n)
	}
	const a = 0x7f1c00000000
	first, _ := ParseHeader(a, hdr(a+48, 0, 0x21000, 0x21000))
	next, _ := ParseHeader(a+HeapMaxSize, hdr(a+48, a, 0x1000, 0x2000))
	orphan, _ := ParseHeader(a+2*HeapMaxSize, hdr(a+5*HeapMaxSize+48, a, 0x1000, 0x2000))
	zero, _ := ParseHeader(a+3*HeapMaxSize, make([]byte, 32))
	heaps, arenas := Validate([]Header{next, orphan, zero, first})
	if len(heaps) != 2 || arenas != 1 {
		t.Errorf("Validate: %d heaps %d arenas, want 2 1", len(heaps), arenas)
	}
	e := ParseSmapsRss([]byte("7f1c00000000-7f1c08000000 rw-p 00000000 00:00 0 \nRss: 1024 kB\n"))
	if got := residentIn(e, []Range{{a, a + HeapMaxSize}}); got != 512<<10 {
		t.Errorf("prorated rss %d", got)
	}
}

// FuzzScanMaps: the streaming summary sees what the whole-file parser sees, and allocates at
// most maxScanAlloc whatever the maps hold.
func FuzzScanMaps(f *testing.F) {
	f.Add([]byte("7f1c00000000-7f1c04000000 rw-p 00000000 00:00 0 \n7f1c04000000-7f1c08000000 ---p 00000000 00:00 0 \n7f1c10000000-7f1c10100000 r-xp 00000000 08:01 1234 /usr/lib/libc.so.6\n"))
	f.Add([]byte("00400000-00401000 r-xp 00000000 08:01 99 /usr/lib/libjemalloc.so.2"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s *mapsSummary
		var err error
		testutil.AllocBound(t, maxScanAlloc, func() { s, err = scanMaps(bytes.NewReader(b), 64) })
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < maxLine {
			maps := ParseMaps(b)
			if s.mappings != len(maps) || s.glibc != glibcVersion(maps) || len(s.cands) != len(candidates(maps, 64)) {
				t.Fatalf("stream: %d mappings, glibc %q, %d candidates; whole: %d, %q, %d",
					s.mappings, s.glibc, len(s.cands), len(maps), glibcVersion(maps), len(candidates(maps, 64)))
			}
		}
	})
}

// mapsText generates the maps of a process with n anonymous mappings and n file mappings
// with long paths, without holding it in memory.
type mapsText struct {
	i, n int
	buf  []byte
}

func (m *mapsText) Read(p []byte) (int, error) {
	for len(m.buf) == 0 {
		if m.i == m.n {
			return 0, io.EOF
		}
		a := uint64(m.i) << 27
		m.buf = fmt.Appendf(nil, "%x-%x rw-p 00000000 00:00 0 \n%x-%x r--p 00000000 08:01 7 /%s%d\n",
			a, a+4096, a+8192, a+12288, strings.Repeat("x", 4000), m.i)
		m.i++
	}
	n := copy(p, m.buf)
	m.buf = m.buf[n:]
	return n, nil
}

// A process with as many mappings as the kernel allows (65 530), each file mapping with a
// 4 KiB path (a 270 MB maps file), costs the streaming reader its fixed buffer and capped
// lists: what it keeps does not grow with the file.
func TestScanMapsMemoryBounded(t *testing.T) {
	var a1, a2 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a1)
	s, err := scanMaps(&mapsText{n: 65530 / 2}, maxCandidates)
	runtime.GC()
	runtime.ReadMemStats(&a2)
	if err != nil || s.mappings != 65530 {
		t.Fatalf("%d mappings, %v", s.mappings, err)
	}
	kept := int64(a2.HeapAlloc) - int64(a1.HeapAlloc)
	t.Logf("65530 mappings: kept %d KiB after the scan (%d candidates), allocated %d MiB in passing", kept>>10, len(s.cands), (a2.TotalAlloc-a1.TotalAlloc)>>20)
	if kept > 1<<20 {
		t.Errorf("kept %d bytes", kept)
	}
	runtime.KeepAlive(s)
}
