//go:build linux

// Package cgroupfs reads cgroup v1 and v2 files into typed values. Readers are functions of
// a cgroup directory (ReadCPUStat(dir), readMemoryV2(dir), ...): one reader per file, errors
// that say which file and why (ErrorReason classifies them). prometheus/procfs parses no
// cgroup files, hence this package. ReadLayout finds the hierarchies under a sysfs path from
// <procfs>/self/mountinfo, and a Hierarchy turns a cgroup path into its directory
// (Hierarchy.Dir); Layout.Discover walks the hierarchies for the watched cgroups; identities
// (pod, container, QoS class) come from cgroup paths (ParseIdentity). Linux only: the walk
// reads directories with getdents.
package cgroupfs
