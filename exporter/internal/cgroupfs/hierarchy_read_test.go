//go:build linux

package cgroupfs

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
)

// The version-neutral readers give the same values on a v1 and a v2 host for the same
// cgroup: each reads its version's file, and a concept a version lacks reads as absent.
func TestVersionNeutralReaders(t *testing.T) {
	const path = "/system.slice/app.service"
	for _, mode := range []fixture.Mode{fixture.V1, fixture.V2} {
		root := t.TempDir()
		cg := fixture.Cgroup{Path: path, QuotaUS: 150000, BurstUS: 5000, Shares: 2048, Weight: 79,
			MemoryLimit: 256 << 20, Cpuset: "0-1", MemUsage: 1 << 20}
		if err := fixture.Write(root, mode, []fixture.Cgroup{cg}); err != nil {
			t.Fatal(err)
		}
		l, err := ReadLayout(filepath.Join(root, "proc"), filepath.Join(root, "sys"))
		if err != nil {
			t.Fatal(err)
		}
		cpu, mem, cpuset := l.CPU.Dir(path), l.Memory.Dir(path), l.CPUSet.Dir(path)
		m, err := l.CPU.ReadCPUMax(cpu)
		if err != nil || m.QuotaUS != 150000 || m.PeriodUS != 100000 {
			t.Errorf("mode %d: ReadCPUMax = %+v, %v", mode, m, err)
		}
		if b, err := l.CPU.ReadCPUBurst(cpu); err != nil || b != 5000 {
			t.Errorf("mode %d: ReadCPUBurst = %d, %v", mode, b, err)
		}
		if w, _, err := l.CPU.ReadCPUWeight(cpu); err != nil || w != 79 { // 2048 shares on the v2 scale: 79
			t.Errorf("mode %d: ReadCPUWeight = %d, %v", mode, w, err)
		}
		if n, err := l.CPUSet.ReadCPUSetCount(cpuset); err != nil || n != 2 {
			t.Errorf("mode %d: ReadCPUSetCount = %d, %v", mode, n, err)
		}
		if lim, err := l.Memory.ReadMemoryLimit(mem); err != nil || lim != 256<<20 {
			t.Errorf("mode %d: ReadMemoryLimit = %d, %v", mode, lim, err)
		}
		if st, err := l.Memory.ReadMemoryStats(mem); err != nil || st.Usage != 1<<20 {
			t.Errorf("mode %d: ReadMemoryStats usage = %d, %v", mode, st.Usage, err)
		}
		if _, err := l.Memory.ReadMemoryHigh(mem); mode == fixture.V1 && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("v1 ReadMemoryHigh: %v, want not-exist", err)
		}
		if _, err := l.CPU.ReadCPUStatLocal(cpu); mode == fixture.V1 && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("v1 ReadCPUStatLocal: %v, want not-exist", err)
		}
		if !l.Memory.HasControlFiles(path) || l.Memory.HasControlFiles("/") != (mode == fixture.V1) {
			t.Errorf("mode %d: HasControlFiles of %s and / wrong", mode, path)
		}
	}
}
