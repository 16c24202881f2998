package collector

import (
	"strconv"
	"syscall"
	"testing"
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
