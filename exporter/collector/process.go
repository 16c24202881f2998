//go:build linux

package collector

import (
	"context"
	"os"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
)

func init() {
	register("process", true, "per-process RSS, threads, start time and CPU of JVMs, Go programs and large processes in watched cgroups", newProcessCollector,
		processInfoDesc, processResidentDesc, processResidentAnonDesc, processThreadsDesc, processStartDesc, processCPUDesc)
}

var (
	processInfoDesc = newProcessDesc("process_info",
		"Watched process (every JVM, every Go program, and others above --process.min-resident); the only series with the PID.", "pid")
	processResidentDesc = newProcessDesc("process_resident_bytes",
		"Resident memory of the process (/proc/<pid>/stat rss).")
	processResidentAnonDesc = newProcessDesc("process_resident_anon_bytes",
		"Resident anonymous memory of the process (/proc/<pid>/status RssAnon): heap, arenas, stacks.")
	processThreadsDesc = newProcessDesc("process_threads",
		"Threads of the process (/proc/<pid>/stat num_threads).")
	processStartDesc = newProcessDesc("process_start_time_seconds",
		"Start time of the process since the epoch (/proc/<pid>/stat starttime): time() minus this is the warm-up clock.")
	processCPUDesc = newProcessDesc("process_cpu_seconds_total",
		"CPU time of the process by mode (/proc/<pid>/stat utime, stime).", "mode")
)

type processCollector struct {
	env      *Env
	pageSize float64
}

func newProcessCollector(env *Env) (Collector, error) {
	return &processCollector{env: env, pageSize: float64(os.Getpagesize())}, nil
}

func (c *processCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	meter := budget.MeterFrom(ctx)
	t := newProcessTally("process", c.env.Errors)
	src := c.env.Processes
	procs, errs := src.Processes(ctx)
	bootErrLogged := false
	for _, err := range errs {
		t.note(err) // counted by the process source
	}
	for _, p := range procs {
		e := newEmitter(ch, processLabels, processLabelValues(p)).metered(meter, p.Cgroup)
		e.gauge(processInfoDesc, 1, strconv.Itoa(p.PID))
		e.gauge(processResidentDesc, float64(p.Stat.RSS)*c.pageSize)
		e.gauge(processResidentAnonDesc, float64(p.Status.RssAnon))
		e.gauge(processThreadsDesc, float64(p.Stat.NumThreads))
		if start, err := src.StartTime(p.Stat.Starttime); err == nil {
			e.gauge(processStartDesc, start)
		} else if !bootErrLogged {
			bootErrLogged = t.add("boot time", err)
		}
		e.counter(processCPUDesc, float64(p.Stat.UTime)/kernel.UserHZ, "user")
		e.counter(processCPUDesc, float64(p.Stat.STime)/kernel.UserHZ, "system")
	}
	return t.err()
}
