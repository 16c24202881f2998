package elfcap

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// maxNewFileAlloc is what elf.NewFile may allocate on a file that passed Check: both header
// tables and the section names at their caps, and the parsed sections (1024 of them).
const maxNewFileAlloc = 3*MaxHeaderTable + 1024*512 + 64<<10

func TestCheckCrafted(t *testing.T) {
	honest := testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: "path\tx\n"}
	if err := Check(bytes.NewReader(honest.Bytes())); err != nil {
		t.Fatalf("honest: %v", err)
	}
	for name, c := range map[string]testutil.CraftedELF{
		"65535 section headers":    {SectionCount: 65535},
		"1 GiB section name table": {NamesSize: 1 << 30},
	} {
		b := append(c.Bytes(), make([]byte, 16<<20)...)
		if err := Check(bytes.NewReader(b)); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %v, want ErrTooLarge", name, err)
		}
		n := testutil.Allocated(func() { _, _ = elf.NewFile(bytes.NewReader(b)) })
		t.Logf("%s: refused; elf.NewFile alone would allocate %d KiB", name, n>>10)
	}
	if err := Check(bytes.NewReader([]byte("#!/bin/sh\n"))); !errors.Is(err, ErrNotELF) {
		t.Errorf("script: %v", err)
	}
}

func TestOpenSkipsHugeSparseFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge")
	if err := os.WriteFile(p, testutil.CraftedELF{}.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, MaxBinarySize+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("huge sparse binary: %v", err)
	}
}

// FuzzCheck: what Check lets through, elf.NewFile parses within maxNewFileAlloc (or
// refuses), and neither panics past the recover every reader runs it under.
func FuzzCheck(f *testing.F) {
	f.Add(testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: "path\tx\n"}.Bytes())
	f.Add(testutil.CraftedELF{SectionCount: 65535}.Bytes())
	f.Add(testutil.CraftedELF{NamesSize: 1 << 30}.Bytes())
	f.Add([]byte("\x7fELF\x01\x02\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if Check(bytes.NewReader(b)) != nil {
			return
		}
		n := testutil.Allocated(func() {
			defer func() { _ = recover() }() // debug/elf's own panics are procread's to recover
			if ef, err := elf.NewFile(bytes.NewReader(b)); err == nil && SectionFits(ef, ".dynsym", 1<<20) {
				_, _ = ef.DynamicSymbols()
			}
		})
		if n > maxNewFileAlloc+8*uint64(len(b)) {
			t.Fatalf("allocated %d bytes for a %d-byte input that passed Check", n, len(b))
		}
	})
}
