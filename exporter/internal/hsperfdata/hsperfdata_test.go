package hsperfdata

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// fixtures are real perf data files captured by testdata/capture.sh, with the output of
// `jcmd <pid> PerfCounter.print` taken right after the copy.
var fixtures = []string{
	"jdk11-g1", "jdk11-parallel",
	"jdk17-g1", "jdk17-parallel", "jdk17-zgc", "jdk17-shenandoah",
	"jdk21-g1", "jdk21-zgc-generational",
}

func loadFixture(t testing.TB, name string) []byte {
	t.Helper()
	return testutil.ReadGzip(t, filepath.Join("testdata", name+".hsperf.gz"))
}

// loadJcmd parses PerfCounter.print output: name=value, strings in double quotes.
func loadJcmd(t testing.TB, name string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name+".jcmd.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), "=")
		if ok {
			out[k] = v
		}
	}
	return out
}

func TestFixturesMatchJcmd(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			s, err := Parse(loadFixture(t, name))
			if err != nil {
				t.Fatal(err)
			}
			jc := loadJcmd(t, name)
			if !s.Header.Accessible || s.Truncated || s.Len() != int(s.Header.NumEntries) {
				t.Fatalf("header %+v truncated=%v entries=%d", s.Header, s.Truncated, s.Len())
			}
			// Every constant counter equals jcmd's; every name we found is known to jcmd.
			constants := 0
			for _, e := range s.Entries() {
				want, ok := jc[e.Name]
				if !ok {
					t.Errorf("%s: not in jcmd output", e.Name)
					continue
				}
				if e.Variability != Constant {
					continue
				}
				var got string
				switch e.Type {
				case 'J':
					v, ok := s.Int(e.Name)
					if !ok {
						t.Errorf("%s: Int failed", e.Name)
					}
					got = strconv.FormatInt(v, 10)
				case 'B':
					v, _ := s.String(e.Name)
					got = strconv.Quote(v)
				}
				if e.Type == 'B' && strings.ContainsAny(got, `\`) {
					continue // jcmd prints non-ASCII raw; compare the ASCII ones
				}
				if got != want {
					t.Errorf("%s = %s, jcmd %s", e.Name, got, want)
				}
				constants++
			}
			if constants < 20 {
				t.Errorf("only %d constant counters compared", constants)
			}
			// The handful the jvm package relies on, spelled out.
			for _, n := range []string{"java.property.java.version", "java.property.java.vm.name",
				"sun.rt.javaCommand", "java.rt.vmArgs", "sun.gc.collector.0.name"} {
				v, ok := s.String(n)
				if n == "sun.gc.collector.0.name" && strings.Contains(name, "jdk17-zgc") {
					n = "sun.gc.collector.2.name"
					v, ok = s.String(n)
				}
				if !ok || strconv.Quote(v) != jc[n] {
					t.Errorf("%s = %q (%v), jcmd %s", n, v, ok, jc[n])
				}
			}
			for _, n := range []string{"sun.os.hrt.frequency", "sun.rt.jvmVersion"} {
				v, ok := s.Int(n)
				if !ok || strconv.FormatInt(v, 10) != jc[n] {
					t.Errorf("%s = %d (%v), jcmd %s", n, v, ok, jc[n])
				}
			}
			if f, _ := s.Frequency(); f != 1e9 {
				t.Errorf("frequency %d", f)
			}
		})
	}
}

func TestReparseReusesLayout(t *testing.T) {
	b := loadFixture(t, "jdk17-g1")
	s, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	// A later read: a counter moved, no entry added.
	b2 := bytes.Clone(b)
	e, _ := s.Lookup("sun.rt.safepoints")
	old, _ := s.Int("sun.rt.safepoints")
	binary.LittleEndian.PutUint64(b2[e.dataOff:], uint64(old+5))
	s2, err := s.Reparse(b2)
	if err != nil {
		t.Fatal(err)
	}
	if s2.layout != s.layout {
		t.Error("layout not reused")
	}
	if v, _ := s2.Int("sun.rt.safepoints"); v != old+5 {
		t.Errorf("safepoints %d want %d", v, old+5)
	}
	// An entry added: the time stamp changes and the layout is walked again.
	binary.LittleEndian.PutUint64(b2[16:], uint64(s.Header.ModTimeStamp+1))
	s3, err := s2.Reparse(b2)
	if err != nil {
		t.Fatal(err)
	}
	if s3.layout == s.layout || s3.Len() != s.Len() {
		t.Error("layout reused after the mod time stamp changed")
	}
}

func TestHeaderErrors(t *testing.T) {
	b := loadFixture(t, "jdk17-g1")
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"short", b[:20], ErrShort},
		{"magic", append([]byte{1, 2, 3, 4}, b[4:]...), ErrMagic},
		{"zeroed", make([]byte, len(b)), ErrMagic},
		{"version", append(bytes.Clone(b[:5]), append([]byte{9}, b[6:]...)...), ErrVersion},
	} {
		if _, err := Parse(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v want %v", tc.name, err, tc.want)
		}
	}
}

// A file cut anywhere after the header yields a prefix of the entries and no error.
func TestTruncated(t *testing.T) {
	b := loadFixture(t, "jdk21-g1")
	full, _ := Parse(b)
	prev := -1
	for n := headerSize; n <= len(b); n += 7 {
		s, err := Parse(b[:n])
		if err != nil {
			t.Fatalf("len %d: %v", n, err)
		}
		if s.Len() < prev {
			t.Fatalf("len %d: %d entries, fewer than %d at a shorter length", n, s.Len(), prev)
		}
		prev = s.Len()
		for i, e := range s.Entries() {
			if e.Name != full.layout.entries[i].Name {
				t.Fatalf("len %d: entry %d = %q want %q", n, i, e.Name, full.layout.entries[i].Name)
			}
		}
		if s.Len() < full.Len() && !s.Truncated {
			t.Fatalf("len %d: short walk not flagged", n)
		}
	}
}

// The writer appends an entry after bumping the count: an entry whose length is still 0 ends
// the data, and the entries before it are kept.
func TestZeroedEntryEndsData(t *testing.T) {
	b := bytes.Clone(loadFixture(t, "jdk17-parallel"))
	s, _ := Parse(b)
	mid := s.layout.entries[s.Len()/2]
	// Find the start of that entry: walk the lengths from the entry offset.
	off := int(s.Header.EntryOffset)
	for i := 0; i < s.Len()/2; i++ {
		off += int(binary.LittleEndian.Uint32(b[off:]))
	}
	if nameOff := int(binary.LittleEndian.Uint32(b[off+4:])); !bytes.HasPrefix(b[off+nameOff:], []byte(mid.Name)) {
		t.Fatalf("entry at %d is not %s", off, mid.Name)
	}
	clear(b[off:])
	s2, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Len() != s.Len()/2 || !s2.Truncated {
		t.Fatalf("got %d entries truncated=%v, want %d", s2.Len(), s2.Truncated, s.Len()/2)
	}
	if _, ok := s2.Int("sun.os.hrt.frequency"); !ok && s.layout.index["sun.os.hrt.frequency"] < s.Len()/2 {
		t.Error("earlier counter lost")
	}
}

// Torn strings: a value overwritten without its NUL, or NUL in the middle, is cut and capped.
func TestTornString(t *testing.T) {
	b := bytes.Clone(loadFixture(t, "jdk17-g1"))
	s, _ := Parse(b)
	e, _ := s.Lookup("sun.rt.javaCommand")
	for i := 0; i < e.VectorLength; i++ {
		b[e.dataOff+i] = 'x'
	}
	v, ok := s.String("sun.rt.javaCommand")
	if !ok || len(v) != e.VectorLength {
		t.Fatalf("unterminated string: %d bytes (vector %d)", len(v), e.VectorLength)
	}
	b[e.dataOff+3] = 0
	if v, _ := s.String("sun.rt.javaCommand"); v != "xxx" {
		t.Errorf("cut string %q", v)
	}
}

// Random mid-write-like mutations of real files: overwrite ranges with zeros, random bytes, or
// bytes from elsewhere in the file; shift the tail; flip lengths. Nothing may panic and every
// returned value must come from inside the buffer.
func TestMutationsNeverPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range fixtures {
		orig := loadFixture(t, name)
		for i := 0; i < 300; i++ {
			b := bytes.Clone(orig)
			for k := 0; k < 1+r.IntN(4); k++ {
				at := r.IntN(len(b))
				n := min(1+r.IntN(256), len(b)-at)
				switch r.IntN(4) {
				case 0:
					clear(b[at : at+n])
				case 1:
					for j := range n {
						b[at+j] = byte(r.Uint32())
					}
				case 2:
					src := r.IntN(len(b) - n + 1)
					copy(b[at:at+n], orig[src:src+n])
				case 3:
					b = b[:at]
				}
			}
			exercise(t, b)
		}
	}
}

func exercise(t testing.TB, b []byte) {
	var s *Snapshot
	var err error
	testutil.AllocBound(t, maxParseAlloc, func() {
		s, err = Parse(b)
		_, _ = ParseWanted(b, func(name []byte) bool { return len(name)%2 == 0 })
	})
	if err != nil {
		return
	}
	if s.Len() > len(b)/entryHeaderSize {
		t.Fatalf("%d entries in %d bytes", s.Len(), len(b))
	}
	for _, n := range s.Names() {
		s.Int(n)
		s.String(n)
		s.Seconds(n)
	}
	s.Reparse(b)
}

// FuzzParse: no input panics, or makes a parse allocate more than maxParseAlloc. Seeds are
// 32 KiB files, and minimizing a new input of that size takes the fuzzer
// minutes during which it reports 0 execs/sec; run it with a minimize budget:
//
//	go test ./exporter/internal/hsperfdata -run '^$' -fuzz FuzzParse -fuzzminimizetime 100x
func FuzzParse(f *testing.F) {
	for _, name := range fixtures {
		f.Add(loadFixture(f, name))
	}
	b := loadFixture(f, "jdk11-g1")
	f.Add(b[:headerSize])
	f.Add(b[:1000])
	f.Add(append(bytes.Clone(b[:4]), 0, 2, 0, 1))
	f.Add(CraftedFile(40000))
	f.Fuzz(func(t *testing.T, b []byte) {
		exercise(t, b)
	})
}
