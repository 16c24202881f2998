//go:build linux

package cgroupfs

import (
	"errors"
	"io/fs"
	"path/filepath"
)

// ReadMemoryEvents reads a v2 memory.events file (low, high, max, oom, oom_kill,
// oom_group_kill; counts of this cgroup and its descendants, unlike memory.events.local).
func ReadMemoryEvents(dir string) (map[string]uint64, error) {
	return readKeyedFile(filepath.Join(dir, "memory.events"))
}

// ReadOOMKillsLocal reads oom_kill from a v2 memory.events.local (Linux 5.2+): the processes
// the OOM killer killed in this cgroup itself, the victim's cgroup (mm/oom_kill.c counts
// MEMCG_OOM_KILL on the victim's memcg; memcg_memory_event adds it to memory.events of every
// ancestor too, to memory.events.local of that cgroup only). ok is false when the kernel has
// no such file (before 5.2).
func ReadOOMKillsLocal(dir string) (kills uint64, ok bool, err error) {
	// Read every scrape for each pod slice: parsed in place, no map.
	var oomKill, groupKills uint64
	err = readFile(filepath.Join(dir, "memory.events.local"), func(b []byte) error {
		return parseKeyed(b, func(k []byte, v uint64) {
			switch string(k) {
			case "oom_kill":
				oomKill = v
			case "oom_group_kill":
				groupKills = v
			}
		})
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	return OOMKilled(oomKill, groupKills), err == nil, err
}

// OOMKilled is the number of processes the OOM killer killed, from v2's oom_kill and
// oom_group_kill of one memory.events (or .local) file. With memory.oom.group set (the kubelet
// sets it on every container on cgroup v2 since 1.28), mm/oom_kill.c's oom_kill_process kills
// the chosen victim, then every member of the group through oom_kill_memcg_member, the victim
// again among them while it still has its mm: each group kill counts its victim twice (a
// one-process container's kill reads oom_kill 2, oom_group_kill 1 on Linux 6.1, seen on the
// test suite's v2 node). The count is oom_kill less one per group kill, and never below the
// group kills, so that a kernel that stops counting the victim twice still shows each kill.
func OOMKilled(oomKill, groupKills uint64) uint64 {
	if oomKill < groupKills {
		return groupKills
	}
	return max(oomKill-groupKills, groupKills)
}

func readKeyedFile(path string) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := readFile(path, func(b []byte) error {
		return parseKeyed(b, func(k []byte, v uint64) { out[string(k)] = v })
	})
	return out, err
}
