package goruntime

import (
	"bytes"
	"debug/buildinfo"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

const craftedMod = "path\texample.com/app\nmod\texample.com/app\t(devel)\t\ndep\tgo.uber.org/automaxprocs\tv1.6.0\th1:x=\n"

// The bounded reader agrees with debug/buildinfo on an honest layout.
func TestReadGoBuildInfoCrafted(t *testing.T) {
	b := testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: craftedMod}.Bytes()
	got, err := ReadBuildInfo(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	want, err := buildinfo.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := ReadBuildInfo(bytes.NewReader(testutil.CraftedELF{}.Bytes())); !errors.Is(err, errNotGo) {
		t.Fatalf("ELF without build info: %v", err)
	}
}

// maxBuildInfoAlloc bounds what one build info read may allocate, whatever the binary says:
// the header tables (64 KiB each), the scan (64 KiB), the module text (1 MiB) and small change.
const maxBuildInfoAlloc = 1<<20 + 4*64<<10 + 64<<10

// Crafted headers that make debug/buildinfo allocate what the file claims cost the bounded
// reader its caps at most, and are not Go binaries to it.
func TestReadGoBuildInfoBoundedOnCraftedBinaries(t *testing.T) {
	for name, c := range map[string]testutil.CraftedELF{
		"module text claims 900 MiB": {GoVersion: "go1.26.8", ModInfo: craftedMod, ModLen: 900 << 20},
		"65535 section headers":      {GoVersion: "go1.26.8", ModInfo: craftedMod, SectionCount: 65535},
		"1 GiB section name table":   {GoVersion: "go1.26.8", ModInfo: craftedMod, NamesSize: 1 << 30},
	} {
		// Padded like a real file, so a reader that believes the headers finds the bytes.
		b := append(c.Bytes(), make([]byte, 16<<20)...)
		var err error
		n := testutil.Allocated(func() { _, err = ReadBuildInfo(bytes.NewReader(b)) })
		std := testutil.Allocated(func() { _, _ = buildinfo.Read(bytes.NewReader(b)) })
		t.Logf("%s: bounded reader allocated %d KiB (err %v); debug/buildinfo %d KiB", name, n>>10, err, std>>10)
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
	var bi any
	n := testutil.Allocated(func() { bi, err = readBuildInfo(t.Context(), p) })
	if !errors.Is(err, ErrParse) {
		t.Fatalf("huge binary: %v, %v", bi, err)
	}
	if n > 64<<10 {
		t.Errorf("skipping a huge binary allocated %d bytes", n)
	}
}

// FuzzReadGoBuildInfo: no input panics, and what the bounded reader accepts, debug/buildinfo
// reads the same way (when it reads it at all). Allocation bounds are checked on the crafted
// inputs above (measuring them here would cost two GCs per input).
func FuzzReadGoBuildInfo(f *testing.F) {
	f.Add(testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: craftedMod}.Bytes())
	f.Add(testutil.CraftedELF{GoVersion: "go1.17", ModInfo: ""}.Bytes())
	f.Add(testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: craftedMod, ModLen: 900 << 20}.Bytes())
	f.Add(testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: craftedMod, SectionCount: 65535}.Bytes())
	f.Add(testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: craftedMod, NamesSize: 1 << 30}.Bytes())
	f.Add(testutil.CraftedELF{}.Bytes())
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		bi, err := ReadBuildInfo(bytes.NewReader(b))
		if err != nil {
			return
		}
		if want, werr := buildinfo.Read(bytes.NewReader(b)); werr == nil && want.String() != bi.String() {
			t.Fatalf("bounded reader:\n%s\ndebug/buildinfo:\n%s", bi, want)
		}
	})
}
