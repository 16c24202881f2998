package goruntime

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

const craftedMod = "path\texample.com/app\nmod\texample.com/app\t(devel)\t\ndep\tgo.uber.org/automaxprocs\tv1.6.0\th1:x=\n" +
	"build\tDefaultGODEBUG=asynctimerchan=1,containermaxprocs=0,x=y\n"

// sameAsStd reports where b differs from what debug/buildinfo read, as far as what Build
// keeps goes; lines longer than maxLine are skipped by ReadBuild, so what they carry is not
// compared.
func sameAsStd(b Build, want *debug.BuildInfo) string {
	short := func(s ...string) bool {
		n := 0
		for _, x := range s {
			n += len(x) + 1
		}
		return n+8 <= maxLine
	}
	if !b.Go || b.GoVersion != tenantstr.Keep(want.GoVersion) {
		return "go version " + b.GoVersion
	}
	if short(want.Main.Path, want.Main.Version, want.Main.Sum) && b.MainModule != tenantstr.Keep(want.Main.Path) {
		return "main module " + b.MainModule
	}
	auto := false
	for _, d := range want.Deps {
		if d.Path == AutoMaxProcsModule && short(d.Path, d.Version, d.Sum) {
			auto = true
		}
	}
	if auto != b.AutoMaxProcs {
		return "automaxprocs"
	}
	godebug := ""
	for _, s := range want.Settings {
		if s.Key == "DefaultGODEBUG" {
			godebug = s.Value
		}
	}
	if short(godebug) {
		for _, k := range godebugKeys {
			if GODEBUGInt(k, 1, godebug) != GODEBUGInt(k, 1, b.DefaultGODEBUG) {
				return "DefaultGODEBUG " + k + " in " + b.DefaultGODEBUG
			}
		}
	}
	return ""
}

// The bounded reader agrees with debug/buildinfo on an honest layout, and keeps of
// DefaultGODEBUG only the settings the rules read.
func TestReadGoBuildInfoCrafted(t *testing.T) {
	b := testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: craftedMod}.Bytes()
	got, err := ReadBuild(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	want, err := buildinfo.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if diff := sameAsStd(got, want); diff != "" || got.DefaultGODEBUG != "containermaxprocs=0" {
		t.Fatalf("got %+v: %s; debug/buildinfo\n%s", got, diff, want)
	}
	if got, err := ReadBuild(bytes.NewReader(testutil.CraftedELF{}.Bytes())); err != nil || got.Go {
		t.Fatalf("ELF without build info: %+v, %v", got, err)
	}
}

// The build info of a real Go program built here, and of this test binary.
func TestReadGoBuildInfoReal(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{self, testutil.Sleeper(t)} {
		img, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadBuild(bytes.NewReader(img))
		if err != nil {
			t.Fatal(err)
		}
		want, err := buildinfo.Read(bytes.NewReader(img))
		if err != nil {
			t.Fatal(err)
		}
		if diff := sameAsStd(got, want); diff != "" {
			t.Errorf("%s: %+v: %s; debug/buildinfo\n%s", filepath.Base(p), got, diff, want)
		}
	}
}

// maxBuildInfoAlloc bounds what one build info read may allocate, whatever the binary says:
// the header tables and section names (64 KiB each), the scan (64 KiB), one line buffer.
const maxBuildInfoAlloc = 5*64<<10 + maxLine

// Crafted headers that make debug/buildinfo allocate what the file claims cost the bounded
// reader its caps at most.
func TestReadGoBuildInfoBoundedOnCraftedBinaries(t *testing.T) {
	for name, c := range map[string]testutil.CraftedELF{
		"module text claims 900 MiB": {GoVersion: "go1.26.8", ModInfo: craftedMod, ModLen: 900 << 20},
		"65535 section headers":      {GoVersion: "go1.26.8", ModInfo: craftedMod, SectionCount: 65535},
		"1 GiB section name table":   {GoVersion: "go1.26.8", ModInfo: craftedMod, NamesSize: 1 << 30},
		"1 MiB of module text":       {GoVersion: "go1.26.8", ModInfo: testutil.CraftedModuleText(1<<20 - 64)},
	} {
		// Padded like a real file, so a reader that believes the headers finds the bytes.
		b := append(c.Bytes(), make([]byte, 16<<20)...)
		var err error
		var got Build
		n := testutil.Allocated(func() { got, err = ReadBuild(bytes.NewReader(b)) })
		std := testutil.Allocated(func() { _, _ = buildinfo.Read(bytes.NewReader(b)) })
		t.Logf("%s: bounded reader allocated %d KiB (%+v, %v); debug/buildinfo %d KiB", name, n>>10, got.Go, err, std>>10)
		if n > maxBuildInfoAlloc {
			t.Errorf("%s: allocated %d bytes, cap %d", name, n, maxBuildInfoAlloc)
		}
	}
}

// An executable above MaxBinarySize is not inspected (a sparse file: no disk used).
func TestHugeSparseBinarySkipped(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: craftedMod}.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxBinarySize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var bi Build
	n := testutil.Allocated(func() { bi, err = readBuild(context.Background(), p, nil) })
	if !errors.Is(err, ErrParse) {
		t.Fatalf("huge binary: %+v, %v", bi, err)
	}
	if n > 64<<10 {
		t.Errorf("skipping a huge binary allocated %d bytes", n)
	}
}

// FuzzReadGoBuildInfo: no input panics or allocates more than maxBuildInfoAlloc, and what
// the bounded reader accepts, debug/buildinfo reads the same way (when it reads it at all).
func FuzzReadGoBuildInfo(f *testing.F) {
	f.Add(testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: craftedMod}.Bytes())
	f.Add(testutil.CraftedELF{GoVersion: "go1.17", ModInfo: ""}.Bytes())
	f.Add(testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: craftedMod, ModLen: 900 << 20}.Bytes())
	f.Add(testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: craftedMod, SectionCount: 65535}.Bytes())
	f.Add(testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: craftedMod, NamesSize: 1 << 30}.Bytes())
	f.Add(testutil.CraftedELF{}.Bytes())
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var bi Build
		var err error
		testutil.AllocBound(t, maxBuildInfoAlloc, func() { bi, err = ReadBuild(bytes.NewReader(b)) })
		if err != nil || !bi.Go {
			return
		}
		if want, werr := buildinfo.Read(bytes.NewReader(b)); werr == nil {
			if diff := sameAsStd(bi, want); diff != "" {
				t.Fatalf("bounded reader %+v: %s; debug/buildinfo:\n%s", bi, diff, want)
			}
		}
	})
}

// shrinking is a file cut at cut once its module text's end was looked at (a tenant's file
// on a network or FUSE mount can change between two reads).
type shrinking struct {
	b   []byte
	cut int
	cot bool
}

func (s *shrinking) ReadAt(p []byte, off int64) (int, error) {
	b := s.b
	if s.cot {
		b = b[:s.cut]
	}
	if len(p) == 1 {
		s.cot = true // the sentinel's newline: the last read before the lines
	}
	return bytes.NewReader(b).ReadAt(p, off)
}

// A file that ends inside a long line of its module text while it is read is read as far as
// it goes.
func TestReadGoBuildInfoShrinkingFile(t *testing.T) {
	b := testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: testutil.CraftedModuleText(256 << 10)}.Bytes()
	cut := bytes.Index(b, []byte("dep\t")) - 100 // inside the long mod line
	done := make(chan struct{})
	var got Build
	var err error
	go func() {
		defer close(done)
		got, err = ReadBuild(&shrinking{b: b, cut: cut})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the read of a shrinking file does not end")
	}
	if err != nil || got.AutoMaxProcs {
		t.Errorf("shrinking: %+v, %v", got, err)
	}
}
