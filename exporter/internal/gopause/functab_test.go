//go:build linux

package gopause

import (
	"bytes"
	"context"
	"debug/elf"
	"debug/gosym"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/gopause/gopausetest"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// maxWalkAlloc bounds what a walk of a function table allocates: its three windows and the
// result, whatever the table claims.
const maxWalkAlloc = 64 << 10

// fromGosym is what debug/gosym finds of the wanted functions in a table (the oracle, on
// trusted tables): the first function of each name, its entry and end.
func fromGosym(t testing.TB, data []byte, text uint64) map[string]span {
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text))
	if err != nil {
		t.Fatal(err)
	}
	fns := map[string]span{}
	for _, name := range wanted {
		if fn := tab.LookupFunc(name); fn != nil {
			fns[name] = span{fn.Entry, fn.End}
		}
	}
	return fns
}

func walk(t testing.TB, data []byte, text uint64) map[string]span {
	t.Helper()
	var fns map[string]span
	var err error
	n := testutil.Allocated(func() {
		fns, err = funcsInPclntab(context.Background(), bytes.NewReader(data), 0, uint64(len(data)), text, wanted)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n > maxWalkAlloc {
		t.Errorf("walk of a %d-byte table allocated %d bytes, bound %d", len(data), n, maxWalkAlloc)
	}
	return fns
}

func sameSpans(a, b map[string]span) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The walk finds what debug/gosym finds, in the layouts of every Go release since 1.2: crafted
// tables of each layout, the function tables of the test program built with this Go and the
// older one, and the Go 1.15 binary of debug/gosym's own test data.
func TestFuncsInPclntabAgreesWithGosym(t *testing.T) {
	const text = 0x401000
	for _, v := range []int{12, 116, 118, 120} {
		c := testutil.CraftedPclntab{Version: v, Text: text, Repeat: 1000, Funcs: []testutil.CraftedFunc{
			{Name: "main.main", Size: 64}, {Name: StopSymbol, Size: 320}, {Name: "runtime.x", Size: 8},
			{Name: wakepSymbol, Size: 96}, {Name: StartSymbol, Size: 1024}, {Name: StopSymbol, Size: 16}, // a second of one name: the first counts
		}}
		data := c.Bytes()
		got, want := walk(t, data, text), fromGosym(t, data, text)
		if !sameSpans(got, want) || len(got) != len(wanted) {
			t.Errorf("Go 1.%d layout: walk %v, debug/gosym %v", v%100, got, want)
		}
	}
	for _, toolchain := range []string{"", gopausetest.OlderToolchain} {
		f, err := elf.Open(gopausetest.Build(t, toolchain, true))
		if err != nil {
			t.Fatal(err)
		}
		data, err := f.Section(".gopclntab").Data()
		if err != nil {
			t.Fatal(err)
		}
		text := f.Section(".text").Addr
		f.Close()
		got, want := walk(t, data, text), fromGosym(t, data, text)
		t.Logf("stwprog (toolchain %q): %v", toolchain, got)
		if !sameSpans(got, want) || len(got) != len(wanted) {
			t.Errorf("stwprog (toolchain %q): walk %v, debug/gosym %v", toolchain, got, want)
		}
	}
	// debug/gosym's test table of a Go 1.15 binary (the Go 1.2 layout), text at 0x1001000.
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	testutil.Require(t, err == nil, "go env GOROOT")
	gz := filepath.Join(strings.TrimSpace(string(goroot)), "src", "debug", "gosym", "testdata", "pcln115.gz")
	_, err = os.Stat(gz)
	testutil.Require(t, err == nil, "the Go distribution's "+gz)
	data := testutil.ReadGzip(t, gz)
	got, want := walk(t, data, 0x1001000), fromGosym(t, data, 0x1001000)
	t.Logf("Go 1.15 table: %v", got)
	if !sameSpans(got, want) || len(got) == 0 {
		t.Errorf("Go 1.15 table: walk %v, debug/gosym %v", got, want)
	}
}

// FuzzFuncsInPclntab: no table panics the walk or makes it allocate more than maxWalkAlloc;
// what it finds in a table debug/gosym reads, debug/gosym finds the same.
func FuzzFuncsInPclntab(f *testing.F) {
	for _, v := range []int{12, 116, 118, 120} {
		f.Add(testutil.CraftedPclntab{Version: v, Text: 0x1000, Repeat: 3, Funcs: []testutil.CraftedFunc{{Name: StopSymbol, Size: 64}, {Name: StartSymbol, Size: 64}}}.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got map[string]span
		var err error
		testutil.AllocBound(t, maxWalkAlloc, func() {
			got, err = funcsInPclntab(context.Background(), bytes.NewReader(b), 0, uint64(len(b)), 0x1000, wanted)
		})
		if err != nil || len(got) == 0 || len(b) > 64<<10 {
			return
		}
		want := func() (fns map[string]span) {
			defer func() {
				if recover() != nil {
					fns = nil
				}
			}()
			return fromGosym(t, b, 0x1000)
		}()
		for name, s := range got {
			if w, ok := want[name]; ok && w != s {
				t.Fatalf("%s: walk %v, debug/gosym %v", name, s, w)
			}
		}
	})
}
