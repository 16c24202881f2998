//go:build linux

package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// The readers below are the version-neutral API, as procfs offers one per concept: each
// reads the file its hierarchy's version has for the concept, so callers never branch on
// the version. A concept a version does not have reads as fs.ErrNotExist (errNoSuchFile),
// like a file an older kernel does not have.

// errNoSuchFile is a concept this cgroup version has no file for.
var errNoSuchFile = fmt.Errorf("%w on this cgroup version", fs.ErrNotExist)

// byVersion reads dir with the reader of h's version.
func byVersion[T any](h *Hierarchy, dir string, v1, v2 func(string) (T, error)) (T, error) {
	if h.Version == 2 {
		return v2(dir)
	}
	return v1(dir)
}

// v2Only is a v1 reader of a concept only v2 has.
func v2Only[T any](string) (T, error) {
	var zero T
	return zero, errNoSuchFile
}

// HasControlFiles is false for the v2 root, which has no cpu.max, memory.current or
// memory.stat: its numbers are the host's (node_exporter's job).
func (h *Hierarchy) HasControlFiles(path string) bool {
	return h.Version != 2 || (path != "/" && path != "")
}

// ReadCPUMax reads the quota: cpu.max (v2), cpu.cfs_quota_us and cpu.cfs_period_us (v1).
func (h *Hierarchy) ReadCPUMax(dir string) (CPUMax, error) {
	return byVersion(h, dir, readCPUMaxV1, readCPUMaxV2)
}

// ReadCPUBurst reads the burst allowance in microseconds: cpu.max.burst (v2),
// cpu.cfs_burst_us (v1, kernel 5.14+).
func (h *Hierarchy) ReadCPUBurst(dir string) (uint64, error) {
	return byVersion(h, dir, readCPUBurstV1, readCPUBurstV2)
}

// ReadCPUWeight reads the cgroup's share of contended CPU on the v2 scale (1–10000):
// cpu.weight (v2), or cpu.shares (v1) converted by SharesToWeight; shares is v1's value as
// read (0 on v2).
func (h *Hierarchy) ReadCPUWeight(dir string) (weight, shares uint64, err error) {
	if h.Version == 2 {
		weight, err = readCPUWeightV2(dir)
		return weight, 0, err
	}
	shares, err = readCPUSharesV1(dir)
	return SharesToWeight(shares), shares, err
}

// ReadCPUSetCount counts the CPUs the cgroup may run on: cpuset.cpus.effective (v2),
// cpuset.cpus (v1). 0 means "inherit" (an empty v1 list).
func (h *Hierarchy) ReadCPUSetCount(dir string) (int, error) {
	file := "cpuset.cpus"
	if h.Version == 2 {
		file = "cpuset.cpus.effective"
	}
	return ReadCpusetCount(filepath.Join(dir, file))
}

// ReadCPUStatLocal reads the seconds the cgroup was throttled by its own or any ancestor's
// quota (v2 cpu.stat.local, Linux 6.6+); fs.ErrNotExist on older kernels, the root and v1.
func (h *Hierarchy) ReadCPUStatLocal(dir string) (float64, error) {
	return byVersion(h, dir, v2Only[float64], readCPUStatLocalV2)
}

// ReadPSI reads the cgroup's pressure stall file of resource ("cpu", "memory", "io");
// fs.ErrNotExist on v1 and on kernels without PSI.
func (h *Hierarchy) ReadPSI(dir, resource string) (PSI, error) {
	if h.Version != 2 {
		return PSI{}, errNoSuchFile
	}
	return ReadPSIFile(dir, resource)
}

// ReadMemoryStats reads usage, memory.stat and the OOM counts: memory.current,
// memory.stat and memory.events (v2); memory.usage_in_bytes, memory.stat and
// memory.oom_control (v1). Not the limit (ReadMemoryLimit).
func (h *Hierarchy) ReadMemoryStats(dir string) (Memory, error) {
	return byVersion(h, dir, readMemoryStatsV1, readMemoryStatsV2)
}

// ReadMemoryLimit reads the hard limit: memory.max (v2), memory.limit_in_bytes (v1);
// 0 means unlimited.
func (h *Hierarchy) ReadMemoryLimit(dir string) (uint64, error) {
	return byVersion(h, dir, readMemoryLimitV1, readMemoryMaxV2)
}

// ReadMemoryHigh reads the throttling limit memory.high (v2 only: fs.ErrNotExist on v1);
// 0 means none.
func (h *Hierarchy) ReadMemoryHigh(dir string) (uint64, error) {
	return byVersion(h, dir, v2Only[uint64], readMemoryHighV2)
}

// ReadMemoryPeak reads the peak usage: memory.peak (v2, Linux 5.19+),
// memory.max_usage_in_bytes (v1). ok is false when the kernel has no such file.
func (h *Hierarchy) ReadMemoryPeak(dir string) (peak uint64, ok bool, err error) {
	name := "memory.max_usage_in_bytes"
	if h.Version == 2 {
		name = "memory.peak"
	}
	peak, err = readUint(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	return peak, err == nil, err
}
