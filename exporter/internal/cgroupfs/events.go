//go:build linux

package cgroupfs

import "path/filepath"

// ReadMemoryEvents reads a v2 memory.events file (low, high, max, oom, oom_kill,
// oom_group_kill; counts of this cgroup and its descendants, unlike memory.events.local).
func ReadMemoryEvents(dir string) (map[string]uint64, error) {
	return readKeyedFile(filepath.Join(dir, "memory.events"))
}

func readKeyedFile(path string) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := readFile(path, func(b []byte) error {
		return parseKeyed(b, func(k []byte, v uint64) { out[string(k)] = v })
	})
	return out, err
}
