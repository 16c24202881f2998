package jvm

import "context"

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
