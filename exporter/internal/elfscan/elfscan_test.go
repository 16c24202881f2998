package elfscan

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// maxScanAlloc bounds what NewFile and a scan of every symbol table allocate together,
// whatever the input: three tables at their 64 KiB caps, the parsed headers, two buffers.
const maxScanAlloc = 512 << 10

// realELFs are ELF files of this machine: a C program, its libc, the test binary (Go, no
// symbol table) and a Go program built here (with one).
func realELFs(t *testing.T) []string {
	t.Helper()
	var files []string
	if p, err := exec.LookPath("sleep"); err == nil {
		files = append(files, p)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, self, testutil.Sleeper(t))
	libs, _ := filepath.Glob("/usr/lib/*-linux-gnu/libc.so.6")
	files = append(files, libs...)
	testutil.Require(t, len(files) >= 4, "no sleep or libc.so.6 here")
	return files
}

// The bounded reader agrees with debug/elf on real files: program headers, sections by name
// (the size in the file: debug/elf gives compressed sections' uncompressed size), and the
// symbols of a wanted set (up to 500 names of each table, with their first definition).
func TestAgreesWithDebugELF(t *testing.T) {
	for _, path := range realELFs(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			img, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want, err := elf.NewFile(bytes.NewReader(img))
			if err != nil {
				t.Fatal(err)
			}
			got, err := NewFile(bytes.NewReader(img))
			if err != nil {
				t.Fatal(err)
			}
			if got.Machine != want.Machine || len(got.Progs) != len(want.Progs) || len(got.Sections) != len(want.Sections) {
				t.Fatalf("machine %v, %d progs, %d sections; debug/elf %v, %d, %d", got.Machine, len(got.Progs), len(got.Sections), want.Machine, len(want.Progs), len(want.Sections))
			}
			for i, p := range want.Progs {
				g := got.Progs[i]
				if g.Type != p.Type || g.Flags != p.Flags || g.Off != p.Off || g.Vaddr != p.Vaddr || g.Filesz != p.Filesz || g.Memsz != p.Memsz {
					t.Errorf("prog %d: %+v, debug/elf %+v", i, g, p.ProgHeader)
				}
			}
			for _, s := range want.Sections {
				g := got.Section(s.Name)
				if g == nil || want.Section(s.Name) != s {
					if g == nil {
						t.Errorf("section %q not found", s.Name)
					}
					continue
				}
				if g.Type != s.Type || g.Offset != s.Offset || g.Size != s.FileSize || g.Addr != s.Addr || g.Link != s.Link || g.Flags != s.Flags {
					t.Errorf("section %q: %+v, debug/elf %+v", s.Name, *g, s.SectionHeader)
				}
			}
			for _, table := range []struct {
				typ  elf.SectionType
				read func() ([]elf.Symbol, error)
			}{{elf.SHT_SYMTAB, want.Symbols}, {elf.SHT_DYNSYM, want.DynamicSymbols}} {
				syms, err := table.read()
				if err != nil {
					continue // no such table
				}
				first := map[string]elf.Symbol{}
				var names []string
				for _, s := range syms {
					if _, ok := first[s.Name]; !ok && s.Name != "" && len(s.Name) <= MaxWantedName && len(names) < 500 {
						first[s.Name] = s
						names = append(names, s.Name)
					}
				}
				found := map[string]Symbol{}
				err = got.Symbols(context.Background(), got.SectionOfType(table.typ), names, func(s Symbol) bool {
					if _, ok := found[s.Name]; !ok {
						found[s.Name] = s
					}
					return false
				})
				if err != nil {
					t.Fatalf("%v: %v", table.typ, err)
				}
				for name, w := range first {
					g, ok := found[name]
					if !ok || g.Value != w.Value || g.Size != w.Size || g.Info != w.Info || g.Section != w.Section {
						t.Errorf("%v %q: %+v (found %v), debug/elf %+v", table.typ, name, g, ok, w)
					}
				}
				t.Logf("%v: %d of %d names compared", table.typ, len(first), len(syms))
			}
		})
	}
}

// Symbol tables that all name one long string (debug/elf copies the name per symbol: 43 GiB
// for 43 689 symbols of 1 MiB) cost the scan its buffers.
func TestSymbolsBoundedOnCraftedTables(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	testutil.Require(t, err == nil, "no sleep in PATH")
	img, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	b := testutil.CraftSymbols(t, img, ".dynsym", 43689, 1<<20-2)
	var hits int
	n := testutil.Allocated(func() {
		f, err := NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		// The crafted name is 1 MiB of 'A': a wanted name that is its prefix must not match.
		err = f.Symbols(context.Background(), f.SectionOfType(elf.SHT_DYNSYM), []string{"malloc", "AAAA"}, func(Symbol) bool { hits++; return false })
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("43 689 symbols naming one 1 MiB string: %d matches, allocated %d KiB (bound %d KiB)", hits, n>>10, maxScanAlloc>>10)
	if hits != 0 || n > maxScanAlloc {
		t.Errorf("%d matches, allocated %d bytes (bound %d)", hits, n, maxScanAlloc)
	}
}

// Section headers and names above their caps are refused before they are read (the program
// headers still serve).
func TestNewFileRefusesLargeTables(t *testing.T) {
	for name, c := range map[string]testutil.CraftedELF{
		"65535 section headers":    {SectionCount: 65535},
		"1 GiB section name table": {NamesSize: 1 << 30},
	} {
		b := append(c.Bytes(), make([]byte, 16<<20)...)
		var f *File
		var err error
		n := testutil.Allocated(func() { f, err = NewFile(bytes.NewReader(b)) })
		if err != nil || !errors.Is(f.SectionErr, ErrTooLarge) || len(f.Sections) != 0 || len(f.Progs) != 1 || n > 64<<10 {
			t.Errorf("%s: %v, allocated %d bytes; want the program header and SectionErr ErrTooLarge", name, err, n)
		} else {
			t.Logf("%s: %v; allocated %d bytes", name, f.SectionErr, n)
		}
	}
	if _, err := NewFile(bytes.NewReader([]byte("#!/bin/sh\n"))); !errors.Is(err, ErrNotELF) {
		t.Errorf("script: %v", err)
	}
}

// A context that ends stops a scan.
func TestSymbolsStopsWithContext(t *testing.T) {
	img, err := os.ReadFile(testutil.Sleeper(t))
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Symbols(ctx, f.Section(".symtab"), []string{"main.main"}, func(Symbol) bool { return false }); !errors.Is(err, context.Canceled) {
		t.Errorf("scan with an ended context: %v", err)
	}
}

// FuzzScan: no input panics, and NewFile plus a scan of every symbol table allocate at most
// maxScanAlloc, whatever the input claims.
func FuzzScan(f *testing.F) {
	f.Add(testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: "path\tx\n"}.Bytes())
	f.Add(testutil.CraftedELF{SectionCount: 65535}.Bytes())
	f.Add(testutil.CraftedELF{NamesSize: 1 << 30}.Bytes())
	f.Add([]byte("\x7fELF\x01\x02\x01"))
	if p, err := exec.LookPath("sleep"); err == nil {
		if img, err := os.ReadFile(p); err == nil {
			f.Add(img)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		testutil.AllocBound(t, maxScanAlloc, func() {
			ef, err := NewFile(bytes.NewReader(b))
			if err != nil {
				return
			}
			for i := range ef.Sections {
				_ = ef.Symbols(context.Background(), &ef.Sections[i], []string{"malloc", "main.main"}, func(Symbol) bool { return false })
			}
			_, _ = ef.ReadAddr(0x400000, 64)
		})
	})
}
