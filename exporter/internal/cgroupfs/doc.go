//go:build linux

// Package cgroupfs reads cgroup v1 and v2 files into typed values, as prometheus/procfs
// reads /proc (procfs parses no cgroup files, hence this package). ReadLayout finds the
// hierarchies under a sysfs path from <procfs>/self/mountinfo; a Hierarchy turns a cgroup
// path into its directory (Hierarchy.Dir) and reads its files through version-neutral readers
// (Hierarchy.ReadCPUMax, ReadMemoryStats, ...: the v1/v2 file names stay inside). One reader
// per file (ReadCPUStat(dir), ReadProcs(dir), ...), errors that say which file and why
// (ErrorReason classifies them). Readers only: discovery, its caches and what a path says
// about the workload belong to packages cgroups and cgroupid.
package cgroupfs
