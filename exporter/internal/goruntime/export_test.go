package goruntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procenv"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
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

// Inspect reads the process pid under procfs (normally /proc). cpu is the quota of the
// process's own cpu cgroup (see CPUQuota). Errors wrap os.ErrPermission (no ptrace-read
// access to exe/environ), os.ErrNotExist (process gone), procread.ErrTimeout or ErrParse.
func Inspect(ctx context.Context, procfs string, pid int, cpu CPUQuota) (*Info, error) {
	status := filepath.Join(procfs, strconv.Itoa(pid), "status")
	return inspect(ctx, procfs, pid, cpu, func() (int, error) { return readAffinity(ctx, status) },
		func() (map[string]string, error) { return procenv.Lookup(ctx, procfs, pid, EnvKeys()...) }, nil)
}

func readAffinity(ctx context.Context, status string) (int, error) {
	b, err := procread.ReadFile(ctx, status, maxStatus)
	if err != nil {
		return 0, err
	}
	for line := range kernel.Lines(b) {
		if v, ok := strings.CutPrefix(string(line), "Cpus_allowed_list:"); ok {
			n, err := kernel.CountCPUList(v)
			if err != nil {
				return 0, fmt.Errorf("%w: Cpus_allowed_list %q", ErrParse, strings.TrimSpace(v))
			}
			return n, nil
		}
	}
	if len(b) == 0 {
		// A process that exited between open and read leaves an empty file.
		return 0, os.ErrNotExist
	}
	return 0, fmt.Errorf("%w: no Cpus_allowed_list", ErrParse)
}
