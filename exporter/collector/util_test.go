package collector

import (
	"context"
	"strconv"
	"syscall"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
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

// cached0 is the first watched cgroup (tests use it as any cgroup).
func cached0(s *cgroups.Source) cgroupid.Cgroup {
	cgs, _ := s.Cgroups(context.Background())
	if len(cgs) == 0 {
		return cgroupid.Cgroup{Path: "/"}
	}
	return cgs[0]
}

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
