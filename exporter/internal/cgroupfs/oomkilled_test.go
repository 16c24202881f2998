//go:build linux

package cgroupfs

import "testing"

// TestOOMKilled: a group kill's victim counted once, whether or not the kernel counts it twice.
func TestOOMKilled(t *testing.T) {
	for _, c := range []struct {
		name           string
		oomKill, group uint64
		want           uint64
	}{
		{"no group kill (v1, or memory.oom.group 0)", 3, 0, 3},
		{"one-process container, group kill: victim counted twice (Linux 6.1, seen on the v2 node)", 2, 1, 1},
		{"three processes, one group kill", 4, 1, 3},
		{"two group kills of one process each", 4, 2, 2},
		{"a kernel that counts the victim once", 1, 1, 1},
		{"group kill read before its victim's count (not below the group kills)", 0, 1, 1},
		{"nothing", 0, 0, 0},
	} {
		if got := OOMKilled(c.oomKill, c.group); got != c.want {
			t.Errorf("%s: OOMKilled(%d, %d) = %d, want %d", c.name, c.oomKill, c.group, got, c.want)
		}
	}
}
