//go:build linux

package collector

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

func init() {
	register("cpu", true, "cgroup CPU quota, weight, usage and CFS throttling counters", newCPUCollector,
		cpuLimitDesc, cpuPeriodDesc, cpuBurstLimitDesc, cpuWeightDesc, cpusetDesc, cpuUsageDesc, cpuPeriodsDesc,
		cpuThrottledPeriodsDesc, cpuThrottledSecondsDesc, cpuThrottledLocalSecondsDesc, cpuBurstsDesc, cpuBurstSecondsDesc,
		cpuPressureWaitingDesc, cpuPressureStalledDesc)
}

var (
	cpuLimitDesc = newCgroupDesc("cpu_limit_cores",
		"CFS bandwidth limit in CPUs (quota / period; v1 cpu.cfs_quota_us, v2 cpu.max). Absent when unlimited.")
	cpuPeriodDesc = newCgroupDesc("cpu_period_seconds",
		"CFS enforcement period (v1 cpu.cfs_period_us, v2 cpu.max). Present where a quota is set with a period other than the default 0.1 s (absent: 0.1 s).")
	cpuBurstLimitDesc = newCgroupDesc("cpu_burst_limit_cores",
		"CFS burst allowance in CPUs (burst / period; v1 cpu.cfs_burst_us, v2 cpu.max.burst). Re-read at most every 30 s. Present, with the two burst counters, where a quota is set and a burst allowance is or was used (absent: 0).")
	cpuWeightDesc = newCgroupDesc("cpu_weight",
		"CPU weight on the cgroup v2 scale 1-10000 (default 100). v1 cpu.shares are converted with the kernel's formula 1 + (shares-2)*9999/262142, so the default 1024 shares read as 39. Re-read at most every 30 s.")
	cpusetDesc = newCgroupDesc("cpu_cpuset_cpus",
		"Number of CPUs the cgroup may run on (v1 cpuset.cpus, v2 cpuset.cpus.effective). Re-read at most every 30 s. Present only when fewer than the host's online CPUs (absent: all).")
	cpuUsageDesc = newCgroupDesc("cpu_usage_seconds_total",
		"CPU time used by the cgroup and its descendants, by mode (v1 cpuacct.stat, v2 cpu.stat).", "mode")
	cpuPeriodsDesc = newCgroupDesc("cpu_periods_total",
		"CFS enforcement periods in which the cgroup had runnable tasks (cpu.stat nr_periods).")
	cpuThrottledPeriodsDesc = newCgroupDesc("cpu_throttled_periods_total",
		"CFS periods in which the cgroup was throttled (cpu.stat nr_throttled). The stall signal: rate over cpu_periods_total.")
	cpuThrottledSecondsDesc = newCgroupDesc("cpu_throttled_seconds_total",
		"Throttled time summed over CPUs (cpu.stat throttled_time / throttled_usec): each CPU's run queue adds its own interval, so this can grow faster than wall time.")
	cpuThrottledLocalSecondsDesc = newCgroupDesc("cpu_throttled_local_seconds_total",
		"Throttled time summed over CPUs by the cgroup's own or any ancestor's CPU limit (cgroup v2 cpu.stat.local throttled_usec, Linux 6.6+). "+
			"Exported for cgroups without a limit of their own under an ancestor's limit (a pod-level limit, a systemd slice), whose own counters stay zero while they are held back; "+
			"absent on older kernels, where the binding ancestor's counters (binding_cgroup of quota_cpu_binding_limit_cores) tell it.")
	cpuBurstsDesc = newCgroupDesc("cpu_bursts_total",
		"Periods in which the cgroup used burst allowance (cpu.stat nr_bursts).")
	cpuBurstSecondsDesc = newCgroupDesc("cpu_burst_seconds_total",
		"CPU time used above the quota from the burst allowance (cpu.stat burst_time / burst_usec).")
	cpuPressureWaitingDesc = newCgroupDesc("cpu_pressure_waiting_seconds_total",
		"PSI: time in which at least one task of the cgroup waited for CPU (cpu.pressure some total; cgroup v2).")
	cpuPressureStalledDesc = newCgroupDesc("cpu_pressure_stalled_seconds_total",
		"PSI: time in which all non-idle tasks of the cgroup waited for CPU (cpu.pressure full total; cgroup v2).")
)

type cpuCollector struct {
	env  *Env
	gate *procread.Gate // per cgroup (collectCgroups)
	// onlineCPUs is the host's CPU count: a cpuset of all of them is the default and not
	// exported (0: unknown, always exported).
	onlineCPUs int
	// noLocalStat is set once a non-root cgroup has no cpu.stat.local (v1, a kernel before
	// 6.6): no open is tried again.
	noLocalStat atomic.Bool
}

func newCPUCollector(env *Env) (Collector, error) {
	return &cpuCollector{env: env, gate: cgroupGate(env, "cpu"), onlineCPUs: hostCPUs(env)}, nil
}

// hostCPUs counts the CPUs of the root cpuset (the host's, also when the exporter runs in a
// container with the host's cgroup tree), else the online CPUs in sysfs; 0 when neither reads.
func hostCPUs(env *Env) int {
	if l := env.Cgroups.Layout(); l.CPUSet != nil {
		if n, err := l.CPUSet.ReadCPUSetCount(l.CPUSet.Dir("/")); err == nil && n > 0 {
			return n
		}
	}
	n, _ := kernel.OnlineCPUs(env.Config.SysPath)
	return n
}

// defaultPeriodUS is the kernel's CFS period: a constant series of it on every cgroup with
// a quota was one of the per-container series budget's largest wastes.
const defaultPeriodUS = 100000

func (c *cpuCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	t := newTally("cpu", c.env.Errors)
	l := c.env.Cgroups.Layout()
	if l.CPU == nil {
		return errNoHierarchy("cpu")
	}
	snap := c.env.Cgroups.Snapshot(ctx)
	cgs, walkErrs := snap.Cgroups, snap.Errs
	for _, we := range walkErrs {
		t.note(we.Err) // counted by the cgroup source
	}
	in := make([]cgroupid.Cgroup, 0, len(cgs))
	for _, cg := range cgs {
		if cg.InCPU {
			in = append(in, cg)
		}
	}
	collectCgroups(ctx, c.gate, in, t, ch, func(cg cgroupid.Cgroup, e emitter) error { return c.collect(l, cg, e, snap.Bindings) })
	return t.err()
}

// collect emits one cgroup's CPU series. Required files missing means the cgroup is
// gone; optional ones (burst, PSI, the v2 root's cpu.max) may legitimately be absent.
func (c *cpuCollector) collect(l *cgroupfs.Layout, cg cgroupid.Cgroup, e emitter, bindings map[string]cgroups.Binding) error {
	dir := l.CPU.Dir(cg.Path)
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
	if cg.ThrottleSubgroup != "" {
		// crun's subgroup has a quota: its throttling is counted there only.
		sub, err := cgroupfs.ReadCPUStat(l.CPU.Dir(cg.ThrottleSubgroup))
		optional(err)
		if err == nil {
			stat.MaxThrottling(sub)
		}
	}

	max := cg.CPUMax // read by discovery in this scrape
	if !cg.HasCPUMax {
		// Absent on the v2 root; a cgroup that is gone failed at cpu.stat.
		if max, err = l.CPU.ReadCPUMax(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	settings, err := c.env.Cgroups.Settings(cg, true)
	optional(err)
	// Like cAdvisor, period, burst and throttling series exist only where a quota is set:
	// elsewhere they are constant zeros. Constant defaults (period 0.1 s, no burst, every
	// CPU) are not exported either: absent means the default (docs/metrics.md's budget).
	limited := max.Limited()
	bursting := limited && (settings.BurstUS > 0 || stat.Bursts > 0 || stat.BurstSeconds > 0)
	if limited {
		if max.PeriodUS != defaultPeriodUS {
			e.gauge(cpuPeriodDesc, float64(max.PeriodUS)/1e6)
		}
		e.gauge(cpuLimitDesc, max.Cores())
		if settings.HasBurst && bursting {
			e.gauge(cpuBurstLimitDesc, float64(settings.BurstUS)/float64(max.PeriodUS))
		}
	}
	if settings.HasWeight {
		e.gauge(cpuWeightDesc, float64(settings.Weight))
	}
	if settings.HasCPUs && (c.onlineCPUs == 0 || settings.CPUs < c.onlineCPUs) {
		e.gauge(cpusetDesc, float64(settings.CPUs))
	}

	switch {
	case stat.HasUsage:
		e.counter(cpuUsageDesc, stat.UserSeconds, "user")
		e.counter(cpuUsageDesc, stat.SystemSeconds, "system")
	case l.CPUAcct != nil:
		if d := l.CPUAcct.Dir(cg.Path); d != "" {
			u, err := cgroupfs.ReadCPUAcctStat(d)
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
	// Held back by an ancestor's limit only (no quota of its own, yet a binding one): its own
	// counters say zero, cpu.stat.local does not.
	if !limited && cg.Path != "/" && !c.noLocalStat.Load() {
		if bindings[cg.Path].CPUCgroup != "" {
			secs, err := l.CPU.ReadCPUStatLocal(dir)
			switch {
			case err == nil:
				e.counter(cpuThrottledLocalSecondsDesc, secs)
			case errors.Is(err, os.ErrNotExist):
				if _, serr := os.Stat(filepath.Join(dir, "cpu.stat")); serr == nil {
					c.noLocalStat.Store(true) // the kernel (or v1) has no such file; not a vanished cgroup
				}
			default:
				errs = append(errs, err)
			}
		}
	}
	if stat.HasBursts && bursting {
		e.counter(cpuBurstsDesc, float64(stat.Bursts))
		e.counter(cpuBurstSecondsDesc, stat.BurstSeconds)
	}

	p, err := l.CPU.ReadPSI(dir, "cpu") // v1: none
	optional(err)
	if err == nil {
		e.counter(cpuPressureWaitingDesc, p.SomeSeconds)
		if p.HasFull {
			e.counter(cpuPressureStalledDesc, p.FullSeconds)
		}
	}
	return errors.Join(errs...)
}
