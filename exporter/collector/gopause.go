//go:build linux

package collector

import (
	"context"
	"errors"
	"fmt"
	"github.com/alecthomas/kingpin/v2"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/gopause"
	"github.com/quota-exporter/quota_exporter/exporter/internal/histogram"
	"github.com/quota-exporter/quota_exporter/exporter/internal/processes"
	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

func init() {
	addFlags(func(app *kingpin.Application, f *Flags) {
		app.Flag("gopause.max-probes", "Cap on the gopause collector's uprobes on this node (2 or 3 per Go process); processes beyond it are refused and counted in quota_exporter_gopause_refused_processes_total{reason=\"node_probe_limit\"}.").Default(strconv.Itoa(gopause.DefaultMaxProbes)).IntVar(&f.cfg.GoPauseMaxProbes)
		app.Flag("gopause.pauses-per-second", "Pauses one process may send per second through the gopause collector's shared ring buffer; beyond it they are dropped in the kernel and counted in quota_exporter_gopause_limited_pauses_total.").Default(strconv.Itoa(gopause.DefaultPausesPerSecond)).IntVar(&f.cfg.GoPausePausesPerSecond)
	})
	register("gopause", false, "Go stop-the-world pause lengths, timed by entry uprobes on the runtime (needs CAP_BPF and CAP_PERFMON, host PID namespace)", newGoPauseCollector,
		goSTWPauseDesc, goPauseAvailableDesc, goPauseAttachedDesc, goPauseLostDesc, goPauseLimitedDesc, goPauseProbesDesc, goPauseRefusedDesc)
}

// stwBuckets: 10 µs (a healthy pause) to 1 s (a pause stretched by CFS throttling).
var stwBuckets = []float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

var (
	goSTWPauseDesc = newProcessDesc("go_stw_pause_seconds",
		"Go stop-the-world pauses of the process since the exporter attached to it, timed by uprobes where the runtime starts and stops its own /sched/pauses/total clock: from the entry of runtime.stopTheWorldWithSema to the entry of runtime.startTheWorldWithSema (GC mark termination) or its call of wakep, once the world runs again (every other pause). "+
			"kind: gc (sweep and mark termination), other (GOMAXPROCS, ReadMemStats, stack dumps, traces), unknown (Go < 1.21 does not pass the reason).",
		"kind")
	goPauseAvailableDesc = prometheus.NewDesc(namespace+"_exporter_gopause_available",
		"quota_exporter: 1 if the Go pause uprobes could be loaded; 0 without CAP_BPF/CAP_PERFMON or uprobe support (the reason is logged once and counted in quota_exporter_read_errors_total{collector=\"gopause\"}).", nil, nil)
	goPauseAttachedDesc = prometheus.NewDesc(namespace+"_exporter_gopause_attached_processes",
		"quota_exporter: Go processes with stop-the-world uprobes attached.", nil, nil)
	goPauseLostDesc = prometheus.NewDesc(namespace+"_exporter_gopause_lost_pauses_total",
		"quota_exporter: pauses dropped because the ring buffer from the kernel was full.", nil, nil)
	goPauseLimitedDesc = prometheus.NewDesc(namespace+"_exporter_gopause_limited_pauses_total",
		"quota_exporter: pauses dropped in the kernel because their process had sent --gopause.pauses-per-second already: one process stopping the world in a loop cannot crowd the others out of the shared ring buffer.", nil, nil)
	goPauseProbesDesc = prometheus.NewDesc(namespace+"_exporter_gopause_probes",
		"quota_exporter: uprobes in place, capped by --gopause.max-probes (2 or 3 per attached process).", nil, nil)
	goPauseRefusedDesc = prometheus.NewDesc(namespace+"_exporter_gopause_refused_processes_total",
		"quota_exporter: Go processes not probed on purpose, by reason: setuid (setuid or setgid executable), file_capabilities, not_regular, too_many_probes (a startTheWorldWithSema with more restart points than a Go toolchain makes), table_too_large (function table above 64 MiB), node_probe_limit (--gopause.max-probes reached), exec_during_attach (the process ran another executable before the probes were in place). One log line each.", []string{"reason"}, nil)
)

// goPauseRefusalReasons are the values of goPauseRefusedDesc's reason, all exported from the start.
var goPauseRefusalReasons = []string{gopause.ReasonSetuid, gopause.ReasonCapabilities, gopause.ReasonNotRegular,
	gopause.ReasonTooManyProbes, gopause.ReasonTableTooLarge, gopause.ReasonNodeProbeLimit, gopause.ReasonExecuted}

// goSTWPauseLabels are goSTWPauseDesc's labels, for the histogram's shared label pairs.
var goSTWPauseLabels = append(append([]string{}, processLabels...), "kind")

// goPauseCollector attaches the uprobes to every watched Go process once (per pid and start
// time), keeps a histogram per process and kind fed by the tracer's goroutine, and detaches
// when the process source forgets the process (exit, or an exec the source notices by a new
// comm; an exec that keeps the comm keeps the old, now idle, probes until the process exits).
// The uprobe PID filter and /proc must be of one PID namespace: run in the host's.
type goPauseCollector struct {
	env    *Env
	tracer *gopause.Tracer // nil: unavailable
	// unsupported: an attach found no uprobe support in the kernel; nothing more is tried.
	unsupported bool

	mu      sync.Mutex
	procs   map[processes.Key]*pausedProcess
	byPID   map[int]*pausedProcess
	refused map[string]float64 // by reason

	// closing holds the attachments of gone processes (under mu) until closeLoop closes
	// them, off every lock: the kernel releases each perf-event uprobe after an RCU
	// tasks-trace grace period, one at a time under a global mutex (0.12 s each measured on
	// 6.18; 0.25 s is reported on 6.12), and each uprobe_multi link after one too, though
	// side by side. Closed in the eviction, under the process source's lock, the probes of
	// 100 Go processes that exited together held every process collector's scrape past its
	// 10 s timeout for some 35 s.
	closing   []*gopause.Attachment
	wake      chan struct{} // one pending signal: closing has work
	stop      chan struct{} // closed by Close
	stopped   chan struct{} // closed by closeLoop when it is done
	closeOnce sync.Once
}

// pausedProcess is one attached process (attach nil: attaching failed, not retried).
type pausedProcess struct {
	pid       int
	attach    *gopause.Attachment
	goVersion string
	hists     map[string]*histogram.Histogram // by kind
}

func newGoPauseCollector(env *Env) (Collector, error) {
	c := &goPauseCollector{env: env, procs: map[processes.Key]*pausedProcess{}, byPID: map[int]*pausedProcess{}, refused: map[string]float64{}}
	tr, err := gopause.New(c.observe, gopause.Options{MaxProbes: env.Config.GoPauseMaxProbes, PausesPerSecond: env.Config.GoPausePausesPerSecond,
		PerfEventUprobes: env.Config.GoPausePerfEventUprobes})
	if err != nil {
		// Not fatal: the exporter runs on without this collector's series, says why once.
		env.Errors.Record("gopause", "loading the uprobe programs (needs CAP_BPF and CAP_PERFMON, or root)", err)
		return c, nil
	}
	c.tracer = tr
	c.wake, c.stop, c.stopped = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go c.closeLoop()
	env.Processes.OnEvict(c.evict)
	return c, nil
}

// closeLoop closes the queued attachments, in order, until Close; then the rest.
func (c *goPauseCollector) closeLoop() {
	defer close(c.stopped)
	for {
		var done bool
		select {
		case <-c.wake:
		case <-c.stop:
			done = true
		}
		c.mu.Lock()
		batch := c.closing
		c.closing = nil
		c.mu.Unlock()
		gopause.CloseAll(batch)
		if done {
			return
		}
	}
}

// observe runs on the tracer's goroutine for every pause.
func (c *goPauseCollector) observe(p gopause.Pause) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pp := c.byPID[p.PID]
	if pp == nil {
		return // detached since
	}
	kind := gopause.Kind(pp.goVersion, p.Reason)
	h := pp.hists[kind]
	if h == nil {
		nh := histogram.New(stwBuckets)
		h = &nh
		pp.hists[kind] = h
	}
	h.Observe(p.Duration.Seconds())
}

// evict detaches the processes the source has forgotten (called under its lock).
func (c *goPauseCollector) evict(keep func(pid int, start uint64) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, pp := range c.procs {
		if keep(k.PID, k.Start) {
			continue
		}
		c.detach(k, pp)
	}
}

// queueClose hands a to closeLoop (under c.mu).
func (c *goPauseCollector) queueClose(a *gopause.Attachment) {
	c.closing = append(c.closing, a)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// detach is called under c.mu; closeLoop removes the probes.
func (c *goPauseCollector) detach(k processes.Key, pp *pausedProcess) {
	if pp.attach != nil {
		c.queueClose(pp.attach)
	}
	delete(c.procs, k)
	if c.byPID[k.PID] == pp {
		delete(c.byPID, k.PID)
	}
}

func (c *goPauseCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	meter := budget.MeterFrom(ctx)
	c.mu.Lock()
	unavailable := c.tracer == nil || c.unsupported
	c.mu.Unlock()
	if unavailable {
		ch <- prometheus.MustNewConstMetric(goPauseAvailableDesc, prometheus.GaugeValue, 0)
		return nil
	}
	t := newProcessTally("gopause", c.env.Errors)
	src := c.env.Processes
	all, _ := src.Processes(ctx)
	procs := processes.WithRuntime(all, processes.RuntimeGo)
	var fresh []*processes.Process
	c.mu.Lock()
	for _, p := range procs {
		if _, ok := c.procs[p.Key()]; !ok {
			fresh = append(fresh, p)
		}
	}
	c.mu.Unlock()
	res := processes.Each(ctx, src, fresh, "gopause", func(ctx context.Context, p *processes.Process) (struct{}, error) {
		return struct{}{}, c.attach(p)
	})
	for i, r := range res {
		if errors.Is(r.Err, gopause.ErrUnsupported) {
			c.mu.Lock()
			first := !c.unsupported
			c.unsupported = true
			c.mu.Unlock()
			if first { // said once; from now on available 0 and no attach
				c.env.Errors.Record("gopause", "attaching uprobes (kernel without uprobe support)", r.Err)
			}
			continue
		}
		if r.Err != nil {
			t.add(fmt.Sprintf("pid %d", fresh[i].PID), processes.CountOnce(r.Err))
		}
	}
	// Built under the lock, sent after it: the tracer's goroutine must not wait on a slow scrape.
	var out []prometheus.Metric
	c.mu.Lock()
	attached := 0
	for _, pp := range c.procs {
		if pp.attach != nil {
			attached++
		}
	}
	for _, p := range procs {
		pp := c.procs[p.Key()]
		if pp == nil || pp.attach == nil {
			continue
		}
		for kind, h := range pp.hists {
			if m := histogramMetric(h, goSTWPauseDesc, newEmitter(nil, goSTWPauseLabels, processLabelValues(p, kind)).pairs, nil); meter.For(p.Cgroup).TakeN(histogramUnits(m)) {
				out = append(out, m)
			}
		}
	}
	c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(goPauseAvailableDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(goPauseAttachedDesc, prometheus.GaugeValue, float64(attached))
	ch <- prometheus.MustNewConstMetric(goPauseLostDesc, prometheus.CounterValue, float64(c.tracer.Lost()))
	ch <- prometheus.MustNewConstMetric(goPauseLimitedDesc, prometheus.CounterValue, float64(c.tracer.Limited()))
	ch <- prometheus.MustNewConstMetric(goPauseProbesDesc, prometheus.GaugeValue, float64(c.tracer.Probes()))
	c.mu.Lock()
	for _, r := range goPauseRefusalReasons {
		ch <- prometheus.MustNewConstMetric(goPauseRefusedDesc, prometheus.CounterValue, c.refused[r], r)
	}
	c.mu.Unlock()
	for _, m := range out {
		ch <- m
	}
	return t.err()
}

// attach finds the runtime functions in the process's executable and puts the uprobes on
// the very file it parsed (gopause.Tracer.AttachProcess). The outcome is kept either way: a
// process is tried once per pid and start time. A refusal is counted by reason and logged
// once, not counted as a read error.
func (c *goPauseCollector) attach(p *processes.Process) error {
	key := p.Key()
	pp := &pausedProcess{pid: p.PID, hists: map[string]*histogram.Histogram{}}
	a, tg, err := c.tracer.AttachProcess(c.env.Config.ProcPath, p.PID)
	if err == nil {
		pp.attach, pp.goVersion = a, tg.GoVersion
		// Series for the kinds this version reports from the first scrape on, so rate()
		// sees their first pauses.
		for _, k := range []string{gopause.Kind(tg.GoVersion, 1), gopause.Kind(tg.GoVersion, 0)} {
			h := histogram.New(stwBuckets)
			pp.hists[k] = &h
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.procs[key]; old != nil { // a concurrent scrape won
		if pp.attach != nil {
			c.queueClose(pp.attach)
		}
		return nil
	}
	c.procs[key] = pp
	if pp.attach != nil {
		c.byPID[p.PID] = pp
	}
	if reason, ok := gopause.Refusal(err); ok {
		c.refused[reason]++
		c.env.Logger.Warn("not probing a Go process", "collector", "gopause", "pid", p.PID, "process", tenantstr.Label(p.Name), "reason", reason, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	return nil
}

// Close detaches every process and unloads the programs. With many processes attached it
// takes long (see closing); the exporter exits after its shutdown wait regardless, and the
// kernel then releases what is left as the process exits.
func (c *goPauseCollector) Close() {
	if c.tracer == nil {
		return
	}
	c.mu.Lock()
	for k, pp := range c.procs {
		c.detach(k, pp)
	}
	c.mu.Unlock()
	c.closeOnce.Do(func() { close(c.stop) })
	<-c.stopped
	c.tracer.Close()
}
