//go:build linux

package collector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/goruntime"
	"github.com/quota-exporter/quota_exporter/exporter/internal/processes"
)

func init() {
	register("go", true, "GOMAXPROCS of Go programs against their CPU quota, from build info and environment", newGoCollector,
		goInfoDesc, goMaxProcsDesc)
}

// goInfoTTL: build info never changes, but the affinity and quota the effective GOMAXPROCS
// follows can; recompute on this clock.
const goInfoTTL = 30 * time.Second

var (
	goInfoDesc = newProcessDesc("go_info",
		"Go program: toolchain version, whether go.uber.org/automaxprocs is linked in, and whether GOMAXPROCS follows the CPU quota (automaxprocs, or Go >= 1.25 with containermaxprocs on per DefaultGODEBUG and GODEBUG).",
		"version", "automaxprocs", "container_aware")
	goMaxProcsDesc = newProcessDesc("go_gomaxprocs",
		"Expected effective GOMAXPROCS: GOMAXPROCS env, else automaxprocs (floor(quota), min 1), else Go >= 1.25 container default min(affinity, max(ceil(quota), 2)), else the CPU affinity count. A program calling runtime.GOMAXPROCS itself is not seen.")
)

// goKept is the go collector's last reading of each process's build info, after the one
// detection made.
var goKept = newKeptSlot[*goruntime.Info]()

// lastGoReading is p's last build info reading (the go collector's, else detection's) if it
// is younger than maxAge.
func lastGoReading(p *processes.Process, maxAge time.Duration) *goruntime.Info {
	info, at := goKept.load(p)
	if info == nil {
		info, at = p.DetectedGo()
	}
	if info == nil || time.Since(at) > maxAge {
		return nil
	}
	return info
}

type goCollector struct{ env *Env }

func newGoCollector(env *Env) (Collector, error) { return &goCollector{env}, nil }

func (c *goCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	meter := budget.MeterFrom(ctx)
	t := newProcessTally("go", c.env.Errors)
	src := c.env.Processes
	all, _ := src.Processes(ctx)
	procs := processes.WithRuntime(all, processes.RuntimeGo)
	// Build info and environment are re-read in parallel, skipped per process while stuck.
	res := processes.Each(ctx, src, procs, "exe", func(ctx context.Context, p *processes.Process) (*goruntime.Info, error) {
		if info := lastGoReading(p, goInfoTTL); info != nil {
			return info, nil
		}
		fresh, err := src.InspectGo(ctx, p)
		if err != nil {
			info := lastGoReading(p, math.MaxInt64) // served with the error, as before it
			if errors.Is(err, os.ErrNotExist) && info != nil {
				err = nil // exited since: its last facts serve this scrape
			}
			return info, err
		}
		goKept.keep(p, fresh)
		return fresh, nil
	})
	for i, r := range res {
		p := procs[i]
		info := r.Value
		if r.Err != nil {
			t.add(fmt.Sprintf("pid %d", p.PID), processes.CountOnce(r.Err))
		}
		if info == nil && missedBound(r.Err) {
			info = lastGoReading(p, goInfoTTL+staleReading) // a stuck read: see staleReading
		}
		if info == nil {
			continue
		}
		e := newEmitter(ch, processLabels, processLabelValues(p)).metered(meter, p.Cgroup)
		e.gauge(goInfoDesc, 1, info.GoVersion, strconv.FormatBool(info.AutoMaxProcs), strconv.FormatBool(info.ContainerAware))
		e.gauge(goMaxProcsDesc, float64(info.GOMAXPROCS))
	}
	return t.err()
}
