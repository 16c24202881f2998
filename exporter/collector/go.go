//go:build linux

package collector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

type goCollector struct{ env *Env }

func newGoCollector(env *Env) (Collector, error) { return &goCollector{env}, nil }

func (c *goCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	t := newProcessTally("go", c.env.Errors)
	procs, _ := c.env.Processes.Processes(ctx)
	for _, p := range procs {
		if p.Runtime != runtimeGo {
			continue
		}
		p.state.mu.Lock()
		info, at := p.state.goInfo, p.state.goAt
		p.state.mu.Unlock()
		if info == nil || time.Since(at) > goInfoTTL {
			fresh, err := c.env.Processes.inspectGo(ctx, p)
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) || info == nil {
					t.add(fmt.Sprintf("pid %d", p.PID), err)
				}
				if info == nil {
					continue
				}
			} else {
				info = fresh
				p.state.mu.Lock()
				p.state.goInfo, p.state.goAt = info, time.Now()
				p.state.mu.Unlock()
			}
		}
		e := newEmitter(ch, processLabels, processLabelValues(p))
		e.gauge(goInfoDesc, 1, info.GoVersion, strconv.FormatBool(info.AutoMaxProcs), strconv.FormatBool(info.ContainerAware))
		e.gauge(goMaxProcsDesc, float64(info.GOMAXPROCS))
	}
	return t.err()
}
