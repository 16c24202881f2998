package collector

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
)

func init() {
	register("cpu", true, "cgroup CPU quota, weight, usage and CFS throttling counters", newCPUCollector)
}

var (
	cpuLimitDesc = newCgroupDesc("cpu_limit_cores",
		"CFS bandwidth limit in CPUs (quota / period; v1 cpu.cfs_quota_us, v2 cpu.max). Absent when unlimited.")
	cpuPeriodDesc = newCgroupDesc("cpu_period_seconds",
		"CFS enforcement period (v1 cpu.cfs_period_us, v2 cpu.max). Present where a quota is set.")
	cpuBurstLimitDesc = newCgroupDesc("cpu_burst_limit_cores",
		"CFS burst allowance in CPUs (burst / period; v1 cpu.cfs_burst_us, v2 cpu.max.burst). Re-read at most every 30 s.")
	cpuWeightDesc = newCgroupDesc("cpu_weight",
		"CPU weight on the cgroup v2 scale 1-10000 (default 100). v1 cpu.shares are converted with the kernel's formula 1 + (shares-2)*9999/262142, so the default 1024 shares read as 39. Re-read at most every 30 s.")
	cpusetDesc = newCgroupDesc("cpu_cpuset_cpus",
		"Number of CPUs the cgroup may run on (v1 cpuset.cpus, v2 cpuset.cpus.effective). Re-read at most every 30 s.")
	cpuUsageDesc = newCgroupDesc("cpu_usage_seconds_total",
		"CPU time used by the cgroup and its descendants, by mode (v1 cpuacct.stat, v2 cpu.stat).", "mode")
	cpuPeriodsDesc = newCgroupDesc("cpu_periods_total",
		"CFS enforcement periods in which the cgroup had runnable tasks (cpu.stat nr_periods).")
	cpuThrottledPeriodsDesc = newCgroupDesc("cpu_throttled_periods_total",
		"CFS periods in which the cgroup was throttled (cpu.stat nr_throttled). The stall signal: rate over cpu_periods_total.")
	cpuThrottledSecondsDesc = newCgroupDesc("cpu_throttled_seconds_total",
		"Throttled time summed over CPUs (cpu.stat throttled_time / throttled_usec): each CPU's run queue adds its own interval, so this can grow faster than wall time.")
	cpuBurstsDesc = newCgroupDesc("cpu_bursts_total",
		"Periods in which the cgroup used burst allowance (cpu.stat nr_bursts).")
	cpuBurstSecondsDesc = newCgroupDesc("cpu_burst_seconds_total",
		"CPU time used above the quota from the burst allowance (cpu.stat burst_time / burst_usec).")
	cpuPressureWaitingDesc = newCgroupDesc("cpu_pressure_waiting_seconds_total",
		"PSI: time in which at least one task of the cgroup waited for CPU (cpu.pressure some total; cgroup v2).")
	cpuPressureStalledDesc = newCgroupDesc("cpu_pressure_stalled_seconds_total",
		"PSI: time in which all non-idle tasks of the cgroup waited for CPU (cpu.pressure full total; cgroup v2).")
)

// settingsMaxAge: weight, burst and cpuset change only when someone resizes the container;
// re-reading them every scrape was a quarter of the scrape's file reads. The quota itself
// (cpu.max) is read every scrape by discovery.
const settingsMaxAge = 30 * time.Second

type cpuCollector struct {
	env *Env

	mu       sync.Mutex
	settings map[string]cpuSettings // by cgroup path
}

// cpuSettings are the slowly changing CPU settings of a cgroup. A zero-valued Has* means the
// file does not exist (old kernel, v2 root).
type cpuSettings struct {
	at                           time.Time
	burstUS, weight              uint64
	cpus                         int
	hasBurst, hasWeight, hasCPUs bool
}

func newCPUCollector(env *Env) (Collector, error) {
	return &cpuCollector{env: env, settings: map[string]cpuSettings{}}, nil
}

func (c *cpuCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	t := newTally("cpu", c.env.Errors)
	cgs, walkErrs := c.env.Cgroups.Cgroups(ctx)
	for _, we := range walkErrs {
		t.add(we.Path, we.Err)
	}
	l := c.env.Cgroups.Layout()
	if l.CPU == nil {
		return nil
	}
	for _, cg := range cgs {
		if ctx.Err() != nil {
			break
		}
		if !cg.InCPU {
			continue
		}
		err := c.collect(l, cg, newEmitter(ch, cgroupLabels, cgroupLabelValues(cg)))
		t.add(cg.Path, err)
	}
	c.forget(cgs)
	return t.err()
}

// settingsFor returns the cached settings of a cgroup, re-reading them when stale.
func (c *cpuCollector) settingsFor(l *cgroupfs.Layout, cg cgroupfs.Cgroup) (cpuSettings, error) {
	c.mu.Lock()
	st, ok := c.settings[cg.Path]
	c.mu.Unlock()
	if ok && time.Since(st.at) < settingsMaxAge {
		return st, nil
	}
	st, err := readCPUSettings(l, cg)
	c.mu.Lock()
	c.settings[cg.Path] = st
	c.mu.Unlock()
	return st, err
}

// forget drops the settings of cgroups that are gone.
func (c *cpuCollector) forget(cgs []cgroupfs.Cgroup) {
	seen := make(map[string]bool, len(cgs))
	for _, cg := range cgs {
		seen[cg.Path] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := range c.settings {
		if !seen[p] {
			delete(c.settings, p)
		}
	}
}

func readCPUSettings(l *cgroupfs.Layout, cg cgroupfs.Cgroup) (cpuSettings, error) {
	st := cpuSettings{at: time.Now()}
	var errs []error
	optional := func(err error) bool {
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		return err == nil
	}
	dir := l.CPU.Dir(cg.Path)
	var err error
	if l.CPU.Version == 2 {
		st.burstUS, err = cgroupfs.ReadCPUBurstV2(dir)
		st.hasBurst = optional(err)
		st.weight, err = cgroupfs.ReadCPUWeightV2(dir)
		st.hasWeight = optional(err)
	} else {
		st.burstUS, err = cgroupfs.ReadCPUBurstV1(dir)
		st.hasBurst = optional(err)
		var shares uint64
		shares, err = cgroupfs.ReadCPUSharesV1(dir)
		st.weight, st.hasWeight = cgroupfs.SharesToWeight(shares), optional(err)
	}
	if l.CPUSet != nil {
		file := "cpuset.cpus"
		if l.CPUSet.Version == 2 {
			file = "cpuset.cpus.effective"
		}
		if d := l.CPUSet.Dir(cg.Path); d != "" {
			st.cpus, err = cgroupfs.ReadCpusetCount(filepath.Join(d, file))
			st.hasCPUs = optional(err) && st.cpus > 0
		}
	}
	return st, errors.Join(errs...)
}

// collect emits one cgroup's CPU series. Required files missing means the cgroup is
// gone; optional ones (burst, PSI, the v2 root's cpu.max) may legitimately be absent.
func (c *cpuCollector) collect(l *cgroupfs.Layout, cg cgroupfs.Cgroup, e emitter) error {
	dir := l.CPU.Dir(cg.Path)
	v2 := l.CPU.Version == 2
	stat, err := cgroupfs.ReadCPUStat(dir)
	if err != nil {
		return err
	}
	var errs []error
	optional := func(err error) {
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}

	max := cg.CPUMax // read by discovery in this scrape
	switch {
	case cg.HasCPUMax:
	case v2:
		max, err = cgroupfs.ReadCPUMaxV2(dir)
		optional(err) // absent on the v2 root
	default:
		max, err = cgroupfs.ReadCPUMaxV1(dir)
		if err != nil {
			return err
		}
	}
	settings, err := c.settingsFor(l, cg)
	optional(err)
	// Like cAdvisor, period, burst and throttling series exist only where a quota is set:
	// elsewhere they are constant zeros.
	limited := max.Limited()
	if limited {
		e.gauge(cpuPeriodDesc, float64(max.PeriodUS)/1e6)
		e.gauge(cpuLimitDesc, max.Cores())
		if settings.hasBurst {
			e.gauge(cpuBurstLimitDesc, float64(settings.burstUS)/float64(max.PeriodUS))
		}
	}
	if settings.hasWeight {
		e.gauge(cpuWeightDesc, float64(settings.weight))
	}
	if settings.hasCPUs {
		e.gauge(cpusetDesc, float64(settings.cpus))
	}

	switch {
	case stat.HasUsage:
		e.counter(cpuUsageDesc, stat.UserSeconds, "user")
		e.counter(cpuUsageDesc, stat.SystemSeconds, "system")
	case l.CPUAcct != nil:
		if d := l.CPUAcct.Dir(cg.Path); d != "" {
			u, err := cgroupfs.ReadCPUAcctStatV1(d)
			optional(err)
			if err == nil {
				e.counter(cpuUsageDesc, u.UserSeconds, "user")
				e.counter(cpuUsageDesc, u.SystemSeconds, "system")
			}
		}
	}

	if stat.HasThrottling && limited {
		e.counter(cpuPeriodsDesc, float64(stat.Periods))
		e.counter(cpuThrottledPeriodsDesc, float64(stat.ThrottledPeriods))
		e.counter(cpuThrottledSecondsDesc, stat.ThrottledSeconds)
	}
	if stat.HasBursts && limited {
		e.counter(cpuBurstsDesc, float64(stat.Bursts))
		e.counter(cpuBurstSecondsDesc, stat.BurstSeconds)
	}

	if v2 {
		p, err := cgroupfs.ReadPSIFile(dir, "cpu")
		optional(err)
		if err == nil {
			e.counter(cpuPressureWaitingDesc, p.SomeSeconds)
			if p.HasFull {
				e.counter(cpuPressureStalledDesc, p.FullSeconds)
			}
		}
	}
	return errors.Join(errs...)
}
