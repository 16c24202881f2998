//go:build linux

package cgroups

import (
	"strings"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

// The limit that binds a process is the smallest on the path from the root to its cgroup:
// the kernel enforces every ancestor's cpu.max and memory.max too. Kubernetes sets pod-level
// limits, ECS task limits and systemd CPUQuota= on slices are ancestors' limits, and on v2
// the throttling they cause is counted only on the ancestor (cpu.stat is not hierarchical
// for nr_throttled/throttled_usec before cpu.stat.local in Linux 6.6).

// Binding is the binding limit of a cgroup, CPU and memory: the smallest on the path from
// the root to it, and the cgroup (path) that sets it. A Cgroup of "" means no limit on the
// whole path. (Exported as quota_*_binding_limit_* with label binding_cgroup.)
type Binding struct {
	CPU          cgroupfs.CPUMax // the binding quota and period
	CPUCores     float64
	CPUCgroup    string
	MemoryBytes  uint64
	MemoryCgroup string
}

// OwnLimits are each cgroup's own quota and memory limit, by path, as discovery read them.
func OwnLimits(cgs []cgroupid.Cgroup) map[string]cgroupfs.Limits {
	own := make(map[string]cgroupfs.Limits, len(cgs))
	for _, cg := range cgs {
		own[cg.Path] = cgroupfs.Limits{
			CPU: cg.CPUMax, HasCPU: cg.InCPU && cg.HasCPUMax,
			Memory: cg.MemoryLimit, HasMemory: cg.InMemory && cg.HasMemoryLimit,
		}
	}
	return own
}

// BindingOf is the binding limit of path, each cgroup on the path from the root taking its
// own limits from limits. When two cgroups on the path have the same limit the deeper one
// binds: its own tasks use up its quota first, and the kernel then counts the throttling on it.
func BindingOf(path string, limits func(path string) cgroupfs.Limits) Binding {
	var b Binding
	for _, p := range pathPrefixes(path) {
		l := limits(p)
		if l.HasCPU && l.CPU.Limited() && (b.CPUCgroup == "" || l.CPU.Cores() <= b.CPUCores) {
			b.CPU, b.CPUCores, b.CPUCgroup = l.CPU, l.CPU.Cores(), p
		}
		if l.HasMemory && l.Memory > 0 && (b.MemoryCgroup == "" || l.Memory <= b.MemoryBytes) {
			b.MemoryBytes, b.MemoryCgroup = l.Memory, p
		}
	}
	return b
}

// Bindings returns, by path, the binding limit of every cgroup in cgs. Ancestors that are
// in cgs are taken from there (discovery keeps every cgroup with a limit, so on an
// unfiltered walk nothing else has one); others are asked of ancestor, once each, when it
// is not nil (a path filter may hide a limited ancestor).
func Bindings(cgs []cgroupid.Cgroup, ancestor func(path string) cgroupfs.Limits) map[string]Binding {
	known := OwnLimits(cgs)
	limitsOf := func(p string) cgroupfs.Limits {
		if l, ok := known[p]; ok {
			return l
		}
		var l cgroupfs.Limits
		if ancestor != nil {
			l = ancestor(p)
		}
		known[p] = l
		return l
	}
	out := make(map[string]Binding, len(cgs))
	for _, cg := range cgs {
		out[cg.Path] = BindingOf(cg.Path, limitsOf)
	}
	return out
}

// pathPrefixes lists "/", "/a", "/a/b", ... up to p itself.
func pathPrefixes(p string) []string {
	out := []string{"/"}
	if p == "/" || p == "" {
		return out
	}
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return append(out, strings.TrimSuffix(p, "/"))
}
