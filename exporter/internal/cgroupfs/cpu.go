//go:build linux

package cgroupfs

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
)

// CPUMax is the CFS bandwidth limit: QuotaUS of CPU time per PeriodUS of wall time.
type CPUMax struct {
	QuotaUS  int64 // -1 when unlimited
	PeriodUS uint64
}

// Limited reports whether a quota is set.
func (m CPUMax) Limited() bool { return m.QuotaUS > 0 && m.PeriodUS > 0 }

// Cores is the quota as a number of CPUs (quota / period).
func (m CPUMax) Cores() float64 { return float64(m.QuotaUS) / float64(m.PeriodUS) }

// readCPUMaxV1 reads cpu.cfs_quota_us and cpu.cfs_period_us.
func readCPUMaxV1(dir string) (CPUMax, error) {
	q, err := readInt(filepath.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return CPUMax{}, err
	}
	p, err := readUint(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return CPUMax{}, err
	}
	if q <= 0 {
		q = -1
	}
	return CPUMax{QuotaUS: q, PeriodUS: p}, nil
}

// readCPUMaxV2 reads cpu.max ("max 100000" or "20000 100000").
func readCPUMaxV2(dir string) (CPUMax, error) {
	var m CPUMax
	err := readFile(filepath.Join(dir, "cpu.max"), func(b []byte) error {
		f := bytes.Fields(b)
		if len(f) != 2 {
			return fmt.Errorf("%w: want \"<quota|max> <period>\", got %q", ErrParse, truncate(b))
		}
		p, err := parseUint(f[1])
		if err != nil {
			return err
		}
		m.PeriodUS = p
		if string(f[0]) == "max" {
			m.QuotaUS = -1
			return nil
		}
		q, err := parseUint(f[0])
		if err != nil {
			return err
		}
		m.QuotaUS = int64(q)
		return nil
	})
	return m, err
}

// readCPUBurstV1 reads cpu.cfs_burst_us (kernel 5.14+), in microseconds.
func readCPUBurstV1(dir string) (uint64, error) {
	return readUint(filepath.Join(dir, "cpu.cfs_burst_us"))
}

// readCPUBurstV2 reads cpu.max.burst, in microseconds.
func readCPUBurstV2(dir string) (uint64, error) {
	return readUint(filepath.Join(dir, "cpu.max.burst"))
}

// readCPUSharesV1 reads cpu.shares (default 1024).
func readCPUSharesV1(dir string) (uint64, error) {
	return readUint(filepath.Join(dir, "cpu.shares"))
}

// readCPUWeightV2 reads cpu.weight (1–10000, default 100).
func readCPUWeightV2(dir string) (uint64, error) {
	return readUint(filepath.Join(dir, "cpu.weight"))
}

// SharesToWeight converts v1 cpu.shares to the v2 cpu.weight scale with the kernel's and
// runc's formula: weight = 1 + (shares-2)*9999/262142, so 2 → 1, 1024 → 39, 262144 → 10000.
func SharesToWeight(shares uint64) uint64 {
	if shares < 2 {
		shares = 2
	}
	if shares > 262144 {
		shares = 262144
	}
	return 1 + (shares-2)*9999/262142
}

// CPUStat is cpu.stat. Fields a kernel or cgroup does not report have their Has flag false.
type CPUStat struct {
	Periods, ThrottledPeriods uint64
	ThrottledSeconds          float64
	Bursts                    uint64
	BurstSeconds              float64
	HasThrottling, HasBursts  bool
	// v2 only: usage split by mode.
	UserSeconds, SystemSeconds float64
	HasUsage                   bool
}

// MaxThrottling takes, counter by counter, the larger of s's and o's throttling and burst
// counters (usage stays s's): the container's figures when its quota is also, or only, on
// crun's subgroup (Cgroup.ThrottleSubgroup). The kernel counts a throttle in the bandwidth
// pool whose runtime ran out (kernel/sched/fair.c: do_sched_cfs_period_timer adds to the
// pool's nr_throttled, unthrottle_cfs_rq to its throttled time), and every level's pool is
// charged the same run time and refilled by its own period timer: with one quota on both,
// either runs out first, so each counts part of the same stalls (measured on v1: 61 of 61
// periods throttled at each level, throttled time 10.1 s on one and 9.4 s on the other). A
// sum would count one stall twice; the larger never counts more than the union, the rule
// the throttling sampler applies to a container and its pod. The result stays monotonic.
func (s *CPUStat) MaxThrottling(o CPUStat) {
	if o.HasThrottling {
		if !s.HasThrottling {
			s.Periods, s.ThrottledPeriods, s.ThrottledSeconds = 0, 0, 0
		}
		s.Periods, s.ThrottledPeriods = max(s.Periods, o.Periods), max(s.ThrottledPeriods, o.ThrottledPeriods)
		s.ThrottledSeconds, s.HasThrottling = max(s.ThrottledSeconds, o.ThrottledSeconds), true
	}
	if o.HasBursts {
		if !s.HasBursts {
			s.Bursts, s.BurstSeconds = 0, 0
		}
		s.Bursts, s.BurstSeconds, s.HasBursts = max(s.Bursts, o.Bursts), max(s.BurstSeconds, o.BurstSeconds), true
	}
}

// ReadCPUStat reads cpu.stat of either version: v1 reports times in ns, v2 in µs.
func ReadCPUStat(dir string) (CPUStat, error) {
	var s CPUStat
	err := readFile(filepath.Join(dir, "cpu.stat"), func(b []byte) error {
		return ParseCPUStat(b, &s)
	})
	return s, err
}

// ParseCPUStat parses cpu.stat content into s (the sampler re-reads an open file with it).
func ParseCPUStat(b []byte, s *CPUStat) error {
	var hasPeriods, hasThrottled, hasThrottledTime, hasUser, hasSystem bool
	err := parseKeyed(b, func(kb []byte, v uint64) {
		k := string(kb) // on the stack unless kept: no allocation per key
		switch k {
		case "nr_periods":
			s.Periods, hasPeriods = v, true
		case "nr_throttled":
			s.ThrottledPeriods, hasThrottled = v, true
		case "throttled_time": // v1, ns
			s.ThrottledSeconds, hasThrottledTime = float64(v)/1e9, true
		case "throttled_usec": // v2
			s.ThrottledSeconds, hasThrottledTime = float64(v)/1e6, true
		case "nr_bursts":
			s.Bursts, s.HasBursts = v, true
		case "burst_time":
			s.BurstSeconds = float64(v) / 1e9
		case "burst_usec":
			s.BurstSeconds = float64(v) / 1e6
		case "user_usec":
			s.UserSeconds, hasUser = float64(v)/1e6, true
		case "system_usec":
			s.SystemSeconds, hasSystem = float64(v)/1e6, true
		}
	})
	if err != nil {
		return err
	}
	s.HasThrottling = hasPeriods && hasThrottled && hasThrottledTime
	s.HasUsage = hasUser && hasSystem
	if s.ThrottledPeriods > s.Periods && s.HasThrottling {
		return fmt.Errorf("%w: nr_throttled %d > nr_periods %d", ErrParse, s.ThrottledPeriods, s.Periods)
	}
	return nil
}

// readCPUStatLocalV2 reads throttled_usec of cpu.stat.local (Linux 6.6+), in seconds: the
// time the cgroup's run queues were throttled by its own or any ancestor's quota, summed over
// CPUs, where cpu.stat's throttled_usec counts only its own quota's throttling. The file is
// absent on older kernels and on the root (fs.ErrNotExist).
func readCPUStatLocalV2(dir string) (float64, error) {
	var secs float64
	var has bool
	err := readFile(filepath.Join(dir, "cpu.stat.local"), func(b []byte) error {
		return parseKeyed(b, func(kb []byte, v uint64) {
			if string(kb) == "throttled_usec" {
				secs, has = float64(v)/1e6, true
			}
		})
	})
	if err == nil && !has {
		err = fmt.Errorf("%w: cpu.stat.local without throttled_usec", ErrParse)
	}
	return secs, err
}

// CPUAcctUsage is cpuacct.stat (v1): user and system time.
type CPUAcctUsage struct {
	UserSeconds, SystemSeconds float64
}

// ReadCPUAcctStat reads cpuacct.stat ("user N\nsystem N" in USER_HZ ticks).
func ReadCPUAcctStat(dir string) (CPUAcctUsage, error) {
	var u CPUAcctUsage
	var hasUser, hasSystem bool
	err := readFile(filepath.Join(dir, "cpuacct.stat"), func(b []byte) error {
		return parseKeyed(b, func(kb []byte, v uint64) {
			k := string(kb) // on the stack unless kept: no allocation per key
			switch k {
			case "user":
				u.UserSeconds, hasUser = float64(v)/kernel.UserHZ, true
			case "system":
				u.SystemSeconds, hasSystem = float64(v)/kernel.UserHZ, true
			}
		})
	})
	if err == nil && (!hasUser || !hasSystem) {
		err = fmt.Errorf("%s: %w: user or system missing", filepath.Join(dir, "cpuacct.stat"), ErrParse)
	}
	return u, err
}

// ReadCpusetCount counts the CPUs in a cpuset list file (cpuset.cpus on v1,
// cpuset.cpus.effective on v2), e.g. "0-3,8" → 5. An empty list means "inherit": 0.
func ReadCpusetCount(path string) (int, error) {
	var n int
	err := readFile(path, func(b []byte) (err error) {
		if n, err = kernel.CountCPUList(string(bytes.TrimSpace(b))); err != nil {
			n, err = 0, fmt.Errorf("%w: %w", ErrParse, err)
		}
		return err
	})
	return n, err
}
