package crafted

import (
	"debug/buildinfo"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// idle builds the hostile node's Go tenant program (stripped or not).
func idle(t *testing.T, strip bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "idle")
	var flags []string
	if strip {
		flags = append(flags, "-ldflags=-s")
	}
	testenv.BuildGo(t, filepath.Join(testenv.RepoRoot(), "test"), "./hostile/cmd/idle", out, flags...)
	return out
}

// rewrite copies the executable src, changes it, checks that the copy still runs (with
// args it must exit 0; without, still be running after a moment) and opens it with
// debug/elf.
func rewrite(t *testing.T, src string, change func(e *ELF) error, args ...string) (*ELF, *elf.File, string) {
	t.Helper()
	e, err := Load(src)
	testenv.Require(t, err == nil, "no "+src+" to copy")
	if err := change(e); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := e.Write(path); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	if len(args) > 0 {
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("crafted %s does not run: %v\n%s", src, err, out)
		}
	} else {
		if err := cmd.Start(); err != nil {
			t.Fatalf("crafted %s does not start: %v", src, err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Fatalf("crafted %s exited: %v", src, err)
		case <-time.After(300 * time.Millisecond):
			cmd.Process.Kill()
			<-done
		}
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return e, f, path
}

func TestBloatDynamicSymbolsStillRuns(t *testing.T) {
	const count, nameLen = 43690, 1<<20 - 2
	_, f, _ := rewrite(t, "/bin/sleep", func(e *ELF) error { return e.BloatSymbols(".dynsym", count, nameLen) }, "0.01")
	sym, str := f.Section(".dynsym"), f.Section(".dynstr")
	if sym.Size != 24*count || str.Size != nameLen+2 || f.Sections[sym.Link] != str {
		t.Fatalf(".dynsym %d bytes, .dynstr %d bytes: not the claimed tables", sym.Size, str.Size)
	}
	// Every symbol but the null one names the one long string (what DynamicSymbols would copy
	// 43 689 times; not called here).
	b := make([]byte, 24)
	if _, err := sym.ReadAt(b, 24*(count-1)); err != nil || binary.LittleEndian.Uint32(b) != 1 {
		t.Fatalf("last symbol's name offset: %v %v", b[:4], err)
	}
}

func TestGoBuildInfoStillRuns(t *testing.T) {
	pathLen := MaxModInfo - 100
	_, _, path := rewrite(t, idle(t, true), func(e *ELF) error { return e.SetGoBuildInfo("go1.26.0", pathLen) })
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(bi.Main.Path) != pathLen || bi.GoVersion != "go1.26.0" {
		t.Fatalf("build info: main module path of %d bytes (want %d), %s", len(bi.Main.Path), pathLen, bi.GoVersion)
	}
}

func TestBloatPclntabStillRuns(t *testing.T) {
	const funcs = 1000 // the node plants a million; the table's shape is the same
	_, f, _ := rewrite(t, idle(t, true), func(e *ELF) error { return e.BloatPclntab(funcs) })
	data, err := f.Section(".gopclntab").Data()
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, f.Section(".text").Addr))
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Funcs) != funcs || tab.Funcs[funcs-1].Name != "main.crafted" {
		t.Fatalf("debug/gosym sees %d functions, want %d named main.crafted", len(tab.Funcs), funcs)
	}
}

func TestBloatSymtabStillRuns(t *testing.T) {
	_, f, _ := rewrite(t, idle(t, false), func(e *ELF) error { return e.BloatSymbols(".symtab", 1000, 4096) })
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	if len(syms) != 999 || len(syms[998].Name) != 4096 {
		t.Fatalf("debug/elf sees %d symbols (want 999 of 4096-byte names)", len(syms))
	}
}

func TestMoveSectionHeaders(t *testing.T) {
	var end uint64
	e, f, _ := rewrite(t, "/bin/sleep", func(e *ELF) error {
		end = e.LoadEnd()
		e.MoveSectionHeaders(4 << 20)
		return nil
	}, "0.01")
	if f.Section(".dynsym") == nil {
		t.Fatal("moved section headers unreadable")
	}
	if shoff := binary.LittleEndian.Uint64(e.Bytes()[ehShoff:]); shoff < end+4<<20 {
		t.Fatalf("section headers at %d, within 4 MiB of the loaded part's end %d", shoff, end)
	}
}

func TestPerfData(t *testing.T) {
	b := PerfData(1 << 20)
	n := binary.LittleEndian.Uint32(b[28:])
	if len(b) > 1<<20 || n < 41000 {
		t.Fatalf("%d bytes, %d entries", len(b), n)
	}
	// The last entry is whole and named by its index.
	last := b[len(b)-25:]
	if got, want := strings.TrimLeft(string(last[20:24]), "0"), strconv.FormatInt(int64(n-1), 36); got != want || last[24] != 0 {
		t.Fatalf("last entry named %q, want %q", got, want)
	}
}

func TestPerfDataStrings(t *testing.T) {
	b := PerfDataStrings(map[string]string{"sun.rt.javaCommand": "Reused 1", "java.property.java.version": "17"})
	if n := binary.LittleEndian.Uint32(b[28:]); n != 2 || binary.LittleEndian.Uint32(b[8:]) != uint32(len(b)) {
		t.Fatalf("%d entries in %d bytes", n, len(b))
	}
	// Entries in name order: the second is the command, its value NUL-terminated at its data offset.
	e := b[32+binary.LittleEndian.Uint32(b[32:]):]
	name, value := e[20:], e[binary.LittleEndian.Uint32(e[16:]):]
	if !strings.HasPrefix(string(name), "sun.rt.javaCommand\x00") || !strings.HasPrefix(string(value), "Reused 1\x00") || e[12] != 'B' {
		t.Fatalf("second entry: %q = %q", name[:20], value[:10])
	}
}
