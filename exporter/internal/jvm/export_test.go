package jvm

import (
	"context"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
)

// Exported for tests only: the product code does not use these.

// CountThreads classifies every thread of pid from <procfs>/<pid>/task/*/comm. The whole walk
// is bounded by ctx (procread). Threads that exit during the walk are skipped.
func CountThreads(ctx context.Context, procfs string, pid int) (ThreadCounts, error) {
	names, err := ThreadNames(ctx, procfs, pid)
	if err != nil {
		return nil, err
	}
	return ClassifyThreads(names), nil
}

// CountCPUList counts the CPUs in a list like "0-3,8,10-11"; 0 when malformed
// (kernel.CountCPUList).
func CountCPUList(s string) int {
	n, _ := kernel.CountCPUList(s)
	return n
}

// Inspect gathers Info for one pid with no cache. See Inspector.
func Inspect(ctx context.Context, procfs string, pid int, cg CgroupCPU) (*Info, error) {
	return (&Inspector{Procfs: procfs}).Inspect(ctx, pid, cg)
}
