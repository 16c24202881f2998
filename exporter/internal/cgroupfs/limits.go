//go:build linux

package cgroupfs

// Limits are one cgroup's own CPU quota and memory limit.
type Limits struct {
	CPU       CPUMax
	HasCPU    bool
	Memory    uint64 // 0 = unlimited
	HasMemory bool
}

// ReadLimits reads a cgroup's own quota and memory limit (for ancestors discovery did not
// return). Missing files read as no limit.
func (l *Layout) ReadLimits(path string) Limits {
	var out Limits
	if l.CPU != nil {
		if d := l.CPU.Dir(path); d != "" {
			m, err := l.CPU.ReadCPUMax(d)
			out.CPU, out.HasCPU = m, err == nil
		}
	}
	if l.Memory != nil {
		if d := l.Memory.Dir(path); d != "" {
			v, err := l.Memory.ReadMemoryLimit(d)
			out.Memory, out.HasMemory = v, err == nil
		}
	}
	return out
}
