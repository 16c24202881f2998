package malloc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// maxExeAllocatorAlloc bounds what telling an executable's allocator may allocate, whatever
// its tables claim: the header tables and the section names at their caps, and the scan's
// buffers.
const maxExeAllocatorAlloc = 256 << 10

// An executable that exports an allocator's API is told by it, and one that exports nothing
// of the kind is not (the dynamic symbols of real programs built here, -rdynamic).
func TestExeAllocatorFromExports(t *testing.T) {
	for _, c := range []struct{ define, want string }{
		{"JEMALLOC", Jemalloc},
		{"TCMALLOC", Tcmalloc},
		{"MIMALLOC", Mimalloc},
		{"OWN_MALLOC", Other},
		{"NOTHING", ""},
	} {
		t.Run(c.define, func(t *testing.T) {
			bin := testutil.BuildC(t, "testdata/exports.c", "-O0", "-rdynamic", "-D"+c.define)
			var got string
			n := testutil.Allocated(func() { got = exeAllocator(context.Background(), bin, nil) })
			if got != c.want {
				t.Errorf("allocator %q, want %q", got, c.want)
			}
			if n > maxExeAllocatorAlloc {
				t.Errorf("allocated %d bytes, bound %d", n, maxExeAllocatorAlloc)
			}
		})
	}
}

// A copy of a real dynamically linked program (sleep: it still runs; the loader reads no
// section header) whose .dynsym and .dynstr section headers point at symbols that all name
// one long string. debug/elf copied the name once per symbol: 2048 symbols of 64 KiB cost
// 128 MiB, 43 689 of 1 MiB (both tables within the old 1 MiB caps) 43 GiB.
func TestExeAllocatorBoundedOnCraftedDynsym(t *testing.T) {
	img, err := os.ReadFile(sleepBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name             string
		symbols, nameLen int
	}{
		{"2048 symbols naming one 64 KiB string", 2048, 64 << 10},
		{"43689 symbols naming one 1 MiB string", 43689, 1<<20 - 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "java")
			if err := os.WriteFile(p, testutil.CraftSymbols(t, img, ".dynsym", c.symbols, c.nameLen), 0o755); err != nil {
				t.Fatal(err)
			}
			var got string
			n := testutil.Allocated(func() { got = exeAllocator(context.Background(), p, nil) })
			t.Logf("allocator %q; allocated %d KiB (bound %d KiB)", got, n>>10, maxExeAllocatorAlloc>>10)
			if n > maxExeAllocatorAlloc {
				t.Errorf("allocated %d bytes, bound %d", n, maxExeAllocatorAlloc)
			}
		})
	}
}

// sleepBinary is the system's sleep, a dynamically linked glibc program.
func sleepBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("sleep")
	testutil.Require(t, err == nil, "no sleep in PATH")
	p, err = filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
