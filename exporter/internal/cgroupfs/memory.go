//go:build linux

package cgroupfs

import (
	"bytes"
	"path/filepath"
)

// unlimitedV1 is the smallest memory.limit_in_bytes treated as "no limit": v1 reports
// PAGE_COUNTER_MAX pages (9223372036854771712 on 4 KiB pages) when unset.
const unlimitedV1 = 1 << 62

// Memory is the memory state of one cgroup in bytes, both versions mapped to one shape.
type Memory struct {
	Usage       uint64
	Limit       uint64 // 0 when unlimited
	WorkingSet  uint64 // usage − inactive_file, floored at 0, as cAdvisor defines it
	RSS         uint64 // anonymous memory (v1 rss / total_rss, v2 anon)
	Cache       uint64 // page cache (v1 cache / total_cache, v2 file)
	OOMKills    uint64
	HasOOMKills bool
	// Stat is memory.stat by type, hierarchical (v1 total_*), read with the figures above at no
	// extra cost; Events is v2 memory.events (high, max, oom, oom_group_kill; oom_kill is OOMKills).
	Stat   MemoryStat
	Events MemoryEvents
}

// MemoryStat holds the memory.stat types an RSS-creep investigation needs. Has* false: the
// kernel does not have that type (v1 has no kernel, sock; anon_thp is v1 total_rss_huge).
type MemoryStat struct {
	Anon, File, Kernel, Sock, Shmem, AnonTHP               uint64
	HasAnon, HasFile, HasKernel, HasSock, HasShmem, HasTHP bool
}

// MemoryEvents is v2 memory.events without oom_kill (Memory.OOMKills). Has false on v1.
type MemoryEvents struct {
	High, Max, OOM, OOMGroupKill uint64
	Has, HasGroupKill            bool
}

// readMemoryLimitV1 reads memory.limit_in_bytes; 0 means unlimited.
func readMemoryLimitV1(dir string) (uint64, error) {
	v, err := readUint(filepath.Join(dir, "memory.limit_in_bytes"))
	if v >= unlimitedV1 {
		v = 0
	}
	return v, err
}

// readMemoryMaxV2 reads memory.max; 0 means unlimited ("max").
func readMemoryMaxV2(dir string) (uint64, error) {
	return readLimitV2(filepath.Join(dir, "memory.max"))
}

// readMemoryHighV2 reads memory.high, the v2 throttling limit; 0 means none ("max").
func readMemoryHighV2(dir string) (uint64, error) {
	return readLimitV2(filepath.Join(dir, "memory.high"))
}

// readLimitV2 reads a v2 byte limit: a number, or "max" (returned as 0).
func readLimitV2(path string) (uint64, error) {
	var v uint64
	err := readFile(path, func(b []byte) (err error) {
		b = bytes.TrimSpace(b)
		if string(b) == "max" {
			return nil
		}
		v, err = parseUint(b)
		return err
	})
	return v, err
}

// readMemoryStatsV1 reads memory.usage_in_bytes, memory.stat and memory.oom_control.
func readMemoryStatsV1(dir string) (Memory, error) {
	var m Memory
	var err error
	if m.Usage, err = readUint(filepath.Join(dir, "memory.usage_in_bytes")); err != nil {
		return m, err
	}
	stat := map[string]uint64{}
	if err := readFile(filepath.Join(dir, "memory.stat"), func(b []byte) error {
		return parseKeyed(b, func(kb []byte, v uint64) {
			k := string(kb) // on the stack unless kept: no allocation per key
			switch k {
			case "rss", "cache", "inactive_file", "shmem", "rss_huge",
				"total_rss", "total_cache", "total_inactive_file", "total_shmem", "total_rss_huge":
				stat[k] = v
			}
		})
	}); err != nil {
		return m, err
	}
	// total_* include descendants, like usage_in_bytes does under use_hierarchy=1.
	pick := func(k string) uint64 {
		if v, ok := stat["total_"+k]; ok {
			return v
		}
		return stat[k]
	}
	m.RSS, m.Cache = pick("rss"), pick("cache")
	m.WorkingSet = workingSet(m.Usage, pick("inactive_file"))
	has := func(k string) bool { _, a := stat[k]; _, b := stat["total_"+k]; return a || b }
	m.Stat = MemoryStat{Anon: m.RSS, File: m.Cache, Shmem: pick("shmem"), AnonTHP: pick("rss_huge"),
		HasAnon: has("rss"), HasFile: has("cache"), HasShmem: has("shmem"), HasTHP: has("rss_huge")}
	m.OOMKills, m.HasOOMKills, _ = ReadOOMKillsV1(dir)
	return m, nil
}

// ReadOOMKillsV1 reads oom_kill from memory.oom_control: the processes the OOM killer killed
// in this cgroup only (v1 does not count descendants' kills). ok is false on kernels before
// 4.13, which have no such line.
func ReadOOMKillsV1(dir string) (kills uint64, ok bool, err error) {
	err = readFile(filepath.Join(dir, "memory.oom_control"), func(b []byte) error {
		kills, ok, err = parseOOMControl(b)
		return err
	})
	return kills, ok, err
}

func parseOOMControl(b []byte) (kills uint64, ok bool, err error) {
	err = parseKeyed(b, func(kb []byte, v uint64) {
		if string(kb) == "oom_kill" { // no allocation: the conversion is only compared
			kills, ok = v, true
		}
	})
	return kills, ok, err
}

// readMemoryStatsV2 reads memory.current, memory.stat and memory.events.
func readMemoryStatsV2(dir string) (Memory, error) {
	var m Memory
	var err error
	if m.Usage, err = readUint(filepath.Join(dir, "memory.current")); err != nil {
		return m, err
	}
	var inactiveFile uint64
	if err := readFile(filepath.Join(dir, "memory.stat"), func(b []byte) error {
		return parseKeyed(b, func(kb []byte, v uint64) {
			k := string(kb) // on the stack unless kept: no allocation per key
			switch k {
			case "anon":
				m.RSS = v
				m.Stat.Anon, m.Stat.HasAnon = v, true
			case "file":
				m.Cache = v
				m.Stat.File, m.Stat.HasFile = v, true
			case "inactive_file":
				inactiveFile = v
			case "kernel":
				m.Stat.Kernel, m.Stat.HasKernel = v, true
			case "sock":
				m.Stat.Sock, m.Stat.HasSock = v, true
			case "shmem":
				m.Stat.Shmem, m.Stat.HasShmem = v, true
			case "anon_thp":
				m.Stat.AnonTHP, m.Stat.HasTHP = v, true
			}
		})
	}); err != nil {
		return m, err
	}
	m.WorkingSet = workingSet(m.Usage, inactiveFile)
	if err := readFile(filepath.Join(dir, "memory.events"), func(b []byte) error {
		return parseKeyed(b, func(kb []byte, v uint64) {
			k := string(kb) // on the stack unless kept: no allocation per key
			switch k {
			case "oom_kill":
				m.OOMKills, m.HasOOMKills = v, true
			case "high":
				m.Events.High, m.Events.Has = v, true
			case "max":
				m.Events.Max = v
			case "oom":
				m.Events.OOM = v
			case "oom_group_kill":
				m.Events.OOMGroupKill, m.Events.HasGroupKill = v, true
			}
		})
	}); err != nil {
		return m, err
	}
	m.OOMKills = OOMKilled(m.OOMKills, m.Events.OOMGroupKill)
	return m, nil
}

func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile > usage {
		return 0
	}
	return usage - inactiveFile
}
