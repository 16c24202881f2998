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
	m, err := readKeyedFile(filepath.Join(dir, "memory.events.local"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	return m["oom_kill"], err == nil, err
}

func readKeyedFile(path string) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := readFile(path, func(b []byte) error {
		return parseKeyed(b, func(k []byte, v uint64) { out[string(k)] = v })
	})
	return out, err
}
