package crafted

import (
	"debug/buildinfo"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// idle builds the hostile node's Go tenant program (stripped or not) into dir.
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

// runs checks that the executable at path starts and is still running after a moment (or,
// with args, exits 0).
func runs(t *testing.T, path string, args ...string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	if len(args) > 0 {
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("crafted %s does not run: %v\n%s", filepath.Base(path), err, out)
		}
		return
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("crafted %s does not start: %v", filepath.Base(path), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("crafted %s exited: %v", filepath.Base(path), err)
	case <-time.After(300 * time.Millisecond):
		cmd.Process.Kill()
		<-done
	}
}

func TestBloatDynamicSymbolsStillRuns(t *testing.T) {
	e, err := Load("/bin/sleep")
	testenv.Require(t, err == nil, "no /bin/sleep to copy")
	const count, nameLen = 43690, 1<<20 - 2
	if err := e.BloatSymbols(".dynsym", count, nameLen); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "java")
	if err := e.Write(path); err != nil {
		t.Fatal(err)
	}
	runs(t, path, "0.01")
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
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
	bin := idle(t, true)
	e, err := Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	pathLen := MaxModInfo - 100
	if err := e.SetGoBuildInfo("go1.26.0", pathLen); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "svc")
	if err := e.Write(path); err != nil {
		t.Fatal(err)
	}
	runs(t, path)
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(bi.Main.Path) != pathLen || bi.GoVersion != "go1.26.0" {
		t.Fatalf("build info: main module path of %d bytes (want %d), %s", len(bi.Main.Path), pathLen, bi.GoVersion)
	}
}

func TestBloatPclntabStillRuns(t *testing.T) {
	bin := idle(t, true)
	e, err := Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	const funcs = 1000 // the node plants a million; the table's shape is the same
	if err := e.BloatPclntab(funcs); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "svc")
	if err := e.Write(path); err != nil {
		t.Fatal(err)
	}
	runs(t, path)
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
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
	bin := idle(t, false)
	e, err := Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.BloatSymbols(".symtab", 1000, 4096); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "svc")
	if err := e.Write(path); err != nil {
		t.Fatal(err)
	}
	runs(t, path)
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	if len(syms) != 999 || len(syms[998].Name) != 4096 {
		t.Fatalf("debug/elf sees %d symbols (want 999 of 4096-byte names)", len(syms))
	}
}

func TestMoveSectionHeaders(t *testing.T) {
	e, err := Load("/bin/sleep")
	testenv.Require(t, err == nil, "no /bin/sleep to copy")
	end := e.LoadEnd()
	e.MoveSectionHeaders(4 << 20)
	path := filepath.Join(t.TempDir(), "sleep")
	if err := e.Write(path); err != nil {
		t.Fatal(err)
	}
	runs(t, path, "0.01")
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
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
	if err := os.WriteFile(filepath.Join(t.TempDir(), "1"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}
