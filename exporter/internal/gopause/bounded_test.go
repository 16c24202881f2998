//go:build linux

package gopause_test

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/gopause"
	"github.com/quota-exporter/quota_exporter/exporter/internal/gopause/gopausetest"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// maxFindAlloc bounds what finding the probe targets in one executable may allocate,
// whatever its tables claim: the header tables and section names at their caps, the scans'
// buffers, the build info scan and the code of startTheWorldWithSema (at most 64 KiB).
const maxFindAlloc = 1 << 20

// Function tables under the 64 MiB table cap that debug/elf and debug/gosym expanded: a
// .gopclntab of 8 MiB claiming a million functions (a Func and a Sym each: 152 MiB), a
// .symtab whose symbols all name one long string (one copy per symbol). Honest binaries,
// stripped or not, are read within the same bound.
func TestFindInBoundedOnCraftedTables(t *testing.T) {
	full := readFile(t, gopausetest.Build(t, "", false))
	stripped := readFile(t, gopausetest.Build(t, "", true))
	text := sectionAddr(t, stripped, ".text")
	for _, c := range []struct {
		name string
		img  []byte
		want error // nil: the targets are found
	}{
		{"honest", full, nil},
		{"honest stripped", stripped, nil},
		{".gopclntab of 8 MiB claiming a million functions",
			testutil.ReplaceSection(t, stripped, ".gopclntab", testutil.CraftedPclntab{Version: 120, Text: text, Repeat: 1 << 20}.Bytes()), gopause.ErrNotGo},
		{".symtab of 2048 symbols naming one 64 KiB string", testutil.CraftSymbols(t, full, ".symtab", 2048, 64<<10), nil},
		{".symtab of 43689 symbols naming one 1 MiB string", testutil.CraftSymbols(t, full, ".symtab", 43689, 1<<20-2), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			var tg gopause.Targets
			n := testutil.Allocated(func() { tg, err = gopause.FindIn(bytes.NewReader(c.img), int64(len(c.img))) })
			t.Logf("%d-byte image: %+v, %v; allocated %d KiB (bound %d KiB)", len(c.img), tg, err, n>>10, maxFindAlloc>>10)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("error %v, want %v", err, c.want)
			}
			if n > maxFindAlloc {
				t.Errorf("allocated %d bytes, bound %d", n, maxFindAlloc)
			}
		})
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sectionAddr(t *testing.T, img []byte, name string) uint64 {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Section(name)
	if s == nil {
		t.Fatalf("no %s", name)
	}
	return s.Addr
}
