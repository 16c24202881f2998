//go:build linux

package collector

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

func init() {
	register("binding", true, "the CPU and memory limits that bind each cgroup: the smallest on its path from the root, and the cgroup that sets it", newBindingCollector,
		cpuBindingLimitDesc, memBindingLimitDesc)
}

var (
	cpuBindingLimitDesc = newCgroupDesc("cpu_binding_limit_cores",
		"The CPU limit that binds this cgroup: the smallest quota/period (cpu.max, v1 cpu.cfs_quota_us) on the path from the root to it, its own or an ancestor's (a Kubernetes pod, an ECS task, a systemd slice with CPUQuota=). binding_cgroup is the cgroup that sets it; on cgroup v2 its throttling is counted on that cgroup's quota_cpu_throttled_* series only. Absent when nothing on the path is limited.",
		"binding_cgroup")
	memBindingLimitDesc = newCgroupDesc("memory_binding_limit_bytes",
		"The memory limit that binds this cgroup: the smallest memory.max (v1 memory.limit_in_bytes) on the path from the root to it, its own or an ancestor's; binding_cgroup is the cgroup that sets it. Absent when nothing on the path is limited.",
		"binding_cgroup")
)

// bindingCollector reads nothing of its own: discovery has read every cgroup's cpu.max
// and memory limit in this scrape. Only when a path filter hides a limited ancestor are the
// ancestors outside the watched set read, once each per scrape.
type bindingCollector struct{ env *Env }

func newBindingCollector(env *Env) (Collector, error) { return &bindingCollector{env}, nil }

func (c *bindingCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	snap := c.env.Cgroups.Snapshot(ctx) // walk errors are counted once, by the cgroup source (collector="discovery")
	cgs, bindings := snap.Cgroups, snap.Bindings
	t := newTally("binding", c.env.Errors)
	if c.env.Config.CgroupInclude != nil || c.env.Config.CgroupExclude != nil {
		// Gated like the cpu and memory collectors' reads: an ancestor whose files block
		// costs one budget once and reads as unlimited until its read returns.
		read, gate := c.env.Cgroups.Layout().ReadLimits, cgroupGate(c.env, "binding")
		ancestor := func(p string) cgroupfs.Limits {
			rctx, cancel := context.WithTimeout(procread.WithPool(ctx, procread.CgroupFiles, ""), cgroupReadBudget)
			defer cancel()
			l, err := procread.GateDo(rctx, gate, p, "cgroup files", func() (cgroupfs.Limits, error) { return read(p), nil })
			if err != nil && !errors.Is(err, procread.ErrStuck) {
				t.add(p, err)
			}
			return l
		}
		// The walk's bindings miss the limited ancestors the filter hid.
		bindings = cgroups.Bindings(cgs, ancestor)
	}
	meter := budget.MeterFrom(ctx)
	for _, cg := range cgs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b := bindings[cg.Path]
		if b.CPUCgroup == "" && b.MemoryCgroup == "" {
			continue
		}
		e := newEmitter(ch, cgroupLabels, cgroupLabelValues(cg)).metered(meter, cg)
		if b.CPUCgroup != "" && cg.InCPU {
			e.gauge(cpuBindingLimitDesc, b.CPUCores, b.CPUCgroup)
		}
		if b.MemoryCgroup != "" && cg.InMemory {
			e.gauge(memBindingLimitDesc, float64(b.MemoryBytes), b.MemoryCgroup)
		}
	}
	return t.err()
}
