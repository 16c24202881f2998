package collector

import (
	"context"
	"strconv"
	"syscall"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

func mustAtoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

func itoa(n int) string { return strconv.Itoa(n) }

// syscallKill ends one of the test's own child processes.
func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// cgroupOf is the watched cgroup at path (a bare one when discovery does not list it).
func cgroupOf(t testing.TB, env *Env, path string) cgroupid.Cgroup {
	t.Helper()
	cgs, _ := env.Cgroups.Cgroups(context.Background())
	for _, cg := range cgs {
		if cg.Path == path {
			return cg
		}
	}
	return cgroupid.Cgroup{Path: path}
}
