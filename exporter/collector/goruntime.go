package collector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/goruntime"
)

func init() {
	register("go", true, "GOMAXPROCS of Go programs against their CPU quota, from build info and environment", newGoCollector)
	runtimeDetectors = append(runtimeDetectors, detectGo)
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

type goEntry struct {
	info *goruntime.Info
	at   time.Time
}

// detectGo recognises Go binaries by their build info (debug/buildinfo on /proc/<pid>/exe).
func detectGo(ctx context.Context, env *Env, p *process) (string, string, error) {
	info, err := goruntime.Inspect(ctx, env.Config.ProcPath, p.PID, processQuota(env, p))
	if err != nil {
		return "", "", err
	}
	if !info.IsGo {
		return "", "", nil
	}
	p.state.data.Store("go", goEntry{info, time.Now()})
	return runtimeGo, "", nil
}

// processQuota is the CPU quota of the process's own cgroup, which is what the Go runtime
// and automaxprocs read.
func processQuota(env *Env, p *process) goruntime.CPUQuota {
	m := p.Cgroup.CPUMax // read by discovery
	if !p.Cgroup.HasCPUMax || !m.Limited() {
		return goruntime.CPUQuota{}
	}
	return goruntime.CPUQuota{QuotaUS: m.QuotaUS, PeriodUS: int64(m.PeriodUS)}
}

type goCollector struct {
	env *Env
	src *ProcessSource
}

func newGoCollector(env *Env) (Collector, error) {
	src, err := processSourceFor(env)
	if err != nil {
		return nil, err
	}
	return &goCollector{env, src}, nil
}

func (c *goCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	t := newProcessTally("go", c.env.Errors)
	procs, _ := c.src.Processes(ctx)
	for _, p := range procs {
		if p.Runtime != runtimeGo {
			continue
		}
		v, _ := p.state.data.Load("go")
		entry, _ := v.(goEntry)
		if entry.info == nil || time.Since(entry.at) > goInfoTTL {
			info, err := goruntime.Inspect(ctx, c.env.Config.ProcPath, p.PID, processQuota(c.env, p))
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) || entry.info == nil {
					t.add(fmt.Sprintf("pid %d", p.PID), err)
				}
				if entry.info == nil {
					continue
				}
			} else {
				entry = goEntry{info, time.Now()}
				p.state.data.Store("go", entry)
			}
		}
		e := newEmitter(ch, processLabels, processLabelValues(p))
		e.gauge(goInfoDesc, 1, entry.info.GoVersion, strconv.FormatBool(entry.info.AutoMaxProcs), strconv.FormatBool(entry.info.ContainerAware))
		e.gauge(goMaxProcsDesc, float64(entry.info.GOMAXPROCS))
	}
	return t.err()
}
