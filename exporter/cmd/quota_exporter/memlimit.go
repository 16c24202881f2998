//go:build linux

package main

import (
	"log/slog"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// setMemoryLimit sets GOMEMLIMIT to ratio of the exporter's own cgroup memory limit
// (automemlimit: cgroup v2 walks the ancestors' memory.max, v1 reads
// hierarchical_memory_limit, so a limit on the pod counts too). Without a limit, with
// GOMEMLIMIT in the environment or with ratio 0, the runtime is left alone.
func setMemoryLimit(ratio float64, logger *slog.Logger) {
	if ratio <= 0 {
		return
	}
	limit, err := memlimit.Set(memlimit.WithRatio(ratio), memlimit.WithProvider(memlimit.FromCgroup))
	switch {
	case err != nil:
		logger.Info("GOMEMLIMIT not set from the cgroup memory limit", "err", err)
	case limit > 0:
		logger.Info("GOMEMLIMIT set from the cgroup memory limit", "bytes", limit, "ratio", ratio)
	}
}
