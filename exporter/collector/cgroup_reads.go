//go:build linux

package collector

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// cgroupReadBudget bounds the reads of one cgroup's files in the cpu and memory collectors,
// but at most half of what is left of the scrape, so that the other cgroups' series are
// served within its deadline. It exceeds settingsBudget: the cpu collector's read includes
// the settings.
const cgroupReadBudget = 2 * time.Second

// cgroupSeriesMax is the buffer of one cgroup's series: the cpu collector emits at most 14,
// memory 8 (20 with --memory.detail). A read that emitted more would block until given up:
// raise it with new series.
const cgroupSeriesMax = 32

// cgroupGate is the collector's stuck-read gate, exported by env.Stuck when there is one.
func cgroupGate(env *Env, name string) *procread.Gate {
	if env.Stuck != nil {
		return env.Stuck.Gate(name)
	}
	return procread.NewGate(name)
}

// collectCgroups reads each cgroup with read, as discovery does: in parallel (procread.Map,
// one worker per CPU the exporter may use), each cgroup within cgroupReadBudget and
// skipped through gate while stuck. A cgroup whose files block inside the kernel costs one budget
// once, is counted as a timeout once and then skipped without a system call until its read
// returns (ErrStuck refusals are not counted again); the other cgroups' series are served.
// Each read emits into its own buffer, forwarded to ch here: a stuck read never writes
// to ch.
func collectCgroups(ctx context.Context, gate *procread.Gate, cgs []cgroupid.Cgroup, t *tally, ch chan<- prometheus.Metric,
	read func(cgroupid.Cgroup, emitter) error) {
	item := cgroupReadBudget
	if dl, ok := ctx.Deadline(); ok {
		item = min(item, max(time.Until(dl)/2, 10*time.Millisecond))
	}
	b := procread.Budget{Workers: min(runtime.GOMAXPROCS(0), len(cgs)/64+1), Item: item, Gate: gate, Kind: "cgroup files",
		Pool: procread.CgroupFiles}
	meter := budget.MeterFrom(ctx)
	res := procread.Map(ctx, b, cgs, func(cg cgroupid.Cgroup) string { return cg.Path }, func(cg cgroupid.Cgroup) ([]prometheus.Metric, error) {
		buf := make(chan prometheus.Metric, cgroupSeriesMax)
		err := read(cg, newEmitter(buf, cgroupLabels, cgroupLabelValues(cg)).metered(meter, cg))
		close(buf)
		out := make([]prometheus.Metric, 0, len(buf))
		for m := range buf {
			out = append(out, m)
		}
		return out, err
	})
	for i, r := range res {
		for _, m := range r.Value {
			ch <- m
		}
		// Not started (the deadline came first): the collector reports the timeout once.
		if r.Done && !errors.Is(r.Err, procread.ErrStuck) {
			t.add(cgs[i].Path, r.Err)
		}
	}
}
