package goruntime

import (
	"strings"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
)

// Exported for tests only: the product code does not use these.

// ParseGODEBUG splits a GODEBUG value ("k=v,k2=v2") into a map; later keys win, fields
// without '=' are ignored (runtime1.go parsegodebug).
func ParseGODEBUG(s string) map[string]string {
	out := map[string]string{}
	for field := range strings.SplitSeq(s, ",") {
		if k, v, ok := strings.Cut(field, "="); ok {
			out[k] = v
		}
	}
	return out
}

// ParseCPUList counts the CPUs in a kernel CPU list such as "0-3,8,10-11" (the
// Cpus_allowed_list line of /proc/<pid>/status); false when malformed (kernel.CountCPUList).
func ParseCPUList(s string) (int, bool) {
	n, err := kernel.CountCPUList(s)
	return n, err == nil
}
