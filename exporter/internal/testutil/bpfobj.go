package testutil

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
)

// SameBPFObjects fails unless the BPF ELF objects at paths (one per architecture, from
// bpf2go -target) load as specs with the same programs (name, type, attach point) and maps
// (name, type, sizes), all little-endian. Objects for another architecture cannot be loaded
// into this kernel; this is what can be checked of them here.
func SameBPFObjects(t testing.TB, paths ...string) {
	t.Helper()
	var first []string
	for i, p := range paths {
		spec, err := ebpf.LoadCollectionSpec(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if spec.ByteOrder != binary.LittleEndian {
			t.Errorf("%s: byte order %v", p, spec.ByteOrder)
		}
		var got []string
		for name, prog := range spec.Programs {
			got = append(got, fmt.Sprintf("prog %s %v %s", name, prog.Type, prog.SectionName))
		}
		for name, m := range spec.Maps {
			got = append(got, fmt.Sprintf("map %s %v %d/%d/%d", name, m.Type, m.KeySize, m.ValueSize, m.MaxEntries))
		}
		slices.Sort(got)
		if i == 0 {
			first = got
			continue
		}
		if !slices.Equal(first, got) {
			t.Errorf("%s and %s differ:\n%q\n%q", paths[0], p, first, got)
		}
	}
}
