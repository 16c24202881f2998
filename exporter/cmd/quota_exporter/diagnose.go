//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"golang.org/x/term"

	"github.com/quota-exporter/quota_exporter/exporter/collector"
	"github.com/quota-exporter/quota_exporter/exporter/internal/diagnose"
	"github.com/quota-exporter/quota_exporter/exporter/internal/diagnose/history"
	"github.com/quota-exporter/quota_exporter/exporter/internal/diagnose/series"
	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
)

// Exit status of diagnose (docs/diagnose.md): findings' worst severity, or 3.
const diagnoseCannotRun = 3

// diagnoseCommand is the `quota_exporter diagnose` subcommand: the exporter's collectors,
// built with the same flags, sampled over --duration and judged by package diagnose.
type diagnoseCommand struct {
	cmd      *kingpin.CmdClause
	duration *time.Duration
	all      *bool
	format   *string
	promURL  *string
	promSel  *string
	promHTTP *string
	promTO   *time.Duration
	promMax  *units.Base2Bytes
	since    *time.Duration
	warmup   *time.Duration
	renamed  []*renamedFlag
}

func addDiagnoseCommand(app *kingpin.Application) *diagnoseCommand {
	c := app.Command("diagnose", "Sample this host for --duration and print each problem found, its evidence and the fix computed for the workload (exit 0 none, 1 warning, 2 critical, 3 could not run).")
	d := &diagnoseCommand{
		cmd:      c,
		duration: c.Flag("duration", "How long to sample (per-second throttling is observed over it).").Default("15s").Duration(),
		all:      c.Flag("all", "List every watched workload with a one-line state, not only the findings.").Bool(),
		format:   c.Flag("format", "Output format: text (colour on a terminal), json (docs/diagnose.schema.json) or markdown.").Default("text").Enum("text", "json", "markdown"),
		promURL:  c.Flag("prometheus.url", "Diagnose over history instead of sampling: the Prometheus that stores this exporter's series (e.g. http://prometheus:9090).").String(),
		promHTTP: c.Flag("prometheus.http-config-file", "With --prometheus.url: HTTP client configuration (TLS, basic auth, bearer token, OAuth2, proxy), the format of Prometheus's own http_config (prometheus/common).").ExistingFile(),
		promTO:   c.Flag("prometheus.timeout", "With --prometheus.url: time bound of all the queries together.").Default("2m").Duration(),
		promMax:  c.Flag("prometheus.max-response-size", "With --prometheus.url: size bound of each query's response.").Default("64MiB").Bytes(),
		promSel:  c.Flag("prometheus.selector", "With --prometheus.url: label matchers for every series, e.g. instance=\"node1:10137\" (cgroup paths repeat across nodes).").String(),
		since:    c.Flag("since", "With --prometheus.url: the span of history to judge.").Default("24h").Duration(),
		warmup:   c.Flag("warmup.period", "A process younger than this is warming up (JIT, class loading, caches): its throttling is judged as warm-up (the mixin's warmupPeriod).").Default(model.Duration(diagnose.DefaultWarmupPeriod).String()).Duration(),
	}
	d.renamed = []*renamedFlag{renamedDuration(c, "warmup.window", "warmup.period", d.warmup)}
	return d
}

func (d *diagnoseCommand) run(cfg collector.Config, names []string, scrapeTimeout time.Duration, logger *slog.Logger) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var progress io.Writer
	if term.IsTerminal(int(os.Stderr.Fd())) {
		progress = os.Stderr
	}
	source := "live"
	var (
		span     time.Duration
		ws       []diagnose.Workload
		notes    []string
		overruns []diagnose.Overrun
		err      error
	)
	if *d.promURL != "" {
		source, span = "history", *d.since
		ws, err = history.Load(ctx, history.Options{URL: *d.promURL, Selector: *d.promSel, Since: *d.since, At: time.Now(), WarmupPeriod: *d.warmup,
			HTTPConfigFile: *d.promHTTP, Timeout: *d.promTO, MaxResponseBytes: int64(*d.promMax)})
	} else {
		ws, span, notes, overruns, err = sampleWorkloads(ctx, cfg, names, *d.duration, *d.warmup, scrapeTimeout, progress, logger)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quota_exporter diagnose:", err)
		return diagnoseCannotRun
	}
	r := diagnose.NewReport(source, span, ws, *d.all, time.Now())
	r.Notes = notes
	r.AddFindings(diagnose.BudgetFindings(overruns)...)
	switch *d.format {
	case "json":
		err = diagnose.WriteJSON(os.Stdout, r)
	case "markdown":
		err = diagnose.WriteMarkdown(os.Stdout, r)
	default:
		err = diagnose.WriteText(os.Stdout, r, diagnose.Style{Color: term.IsTerminal(int(os.Stdout.Fd()))})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quota_exporter diagnose:", err)
		return diagnoseCannotRun
	}
	return r.ExitCode()
}

// sampleWorkloads builds the collectors, gathers at the start and the end of duration and
// turns the difference into workloads. Collectors that fail become notes, not errors: the
// findings that need them are then missing, and the report says so. The throttling sampler
// runs on its own and hands diagnose each window as it closes (diagnose.Windows): the
// windows in order give the longest run of throttled ones, which two gathers cannot.
func sampleWorkloads(ctx context.Context, cfg collector.Config, names []string, duration, warmup, timeout time.Duration, progress io.Writer, logger *slog.Logger) ([]diagnose.Workload, time.Duration, []string, []diagnose.Overrun, error) {
	if cfg.ThrottleWindow <= 0 {
		cfg.ThrottleWindow = time.Second
	}
	// The arena finding needs the heaps' resident size, which the smaps collector reads in
	// the background, at most every interval: half the duration gets one read of each
	// process (once the first gather has found its heaps) before the second gather, and no
	// more than two (smaps walks page tables).
	cfg.SmapsInterval = max(duration/2, time.Second)
	_ = raiseFileLimit()
	env, err := collector.NewEnv(cfg, logger)
	if err != nil {
		return nil, 0, nil, nil, fmt.Errorf("cannot find cgroup hierarchies: %w", err)
	}
	var rest []string
	sample := false
	for _, n := range names {
		if n == "throttle" {
			sample = true
		} else {
			rest = append(rest, n)
		}
	}
	set, err := collector.NewSet(env, rest)
	if err != nil {
		return nil, 0, nil, nil, fmt.Errorf("cannot create collectors: %w", err)
	}
	defer set.Close()
	// Windows close from the sampler's start on; the ones between the two gathers count.
	var windows atomic.Pointer[diagnose.Windows]
	if sample {
		sampler := collector.NewThrottleSampler(env, func(cgroup string, ratio float64) {
			if w := windows.Load(); w != nil {
				w.Observe(cgroup, ratio)
			}
		})
		defer sampler.Close()
	}
	// One window in, the sampler has a baseline of every cgroup with a quota, so the windows
	// from the first gather on are whole.
	if !sleepCtx(ctx, cfg.ThrottleWindow+100*time.Millisecond) {
		return nil, 0, nil, nil, ctx.Err()
	}
	t0 := time.Now()
	start, err := set.Gather(ctx, timeout)
	if start == nil {
		return nil, 0, nil, nil, fmt.Errorf("first collection: %w", err)
	}
	wins := diagnose.NewWindows()
	windows.Store(wins)
	const tick = 250 * time.Millisecond // the progress bar's
	for elapsed := time.Duration(0); elapsed < duration; {
		step := min(tick, duration-elapsed)
		if !sleepCtx(ctx, step) {
			return nil, 0, nil, nil, ctx.Err()
		}
		elapsed += step
		if progress != nil {
			fmt.Fprintf(progress, "\rsampling %s %3.0f/%.0f s", bar(elapsed, duration), elapsed.Seconds(), duration.Seconds())
		}
	}
	windows.Store(nil)
	if progress != nil {
		fmt.Fprint(progress, "\r\x1b[K")
	}
	// The span is from the start of one collection to the start of the other: on a busy
	// host a collection takes seconds, and both read their counters at about the same point.
	span := time.Since(t0)
	end, err := set.Gather(ctx, timeout)
	if end == nil {
		return nil, 0, nil, nil, fmt.Errorf("second collection: %w", err)
	}
	var notes []string
	notes = append(notes, failedCollectors(end)...)
	// Unreadable processes are skipped quietly by the collectors; the report must say why
	// their findings are missing.
	denied := ""
	if n := permissionErrors(end); n > 0 {
		denied = fmt.Sprintf("; %.0f reads of processes' files were denied", n)
	}
	if uid := os.Geteuid(); uid != 0 || denied != "" {
		notes = append(notes, fmt.Sprintf("running as uid %d%s: the JVM, Go and arena findings need root with CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH and may be missing (docs/diagnose.md)", uid, denied))
	}
	// glibc's arena limit uses the online CPUs, not the quota (0 when unreadable).
	online, _ := kernel.OnlineCPUs(cfg.SysPath)
	ws := diagnose.FromFamilies(start, end, diagnose.Observation{Span: span, End: time.Now(), HostCPUs: online, WarmupPeriod: warmup})
	wins.Apply(ws)
	return ws, span, notes, overruns(env.Budgets), nil
}

// overruns are the tenants over one of the exporter's budgets in its last passes: what the
// exporter left out of them, which the report names.
func overruns(b *collector.Budgets) []diagnose.Overrun {
	var out []diagnose.Overrun
	for _, s := range b.Skips() {
		l := b.Limits().Of(s.Budget)
		out = append(out, diagnose.Overrun{Budget: s.Budget, Reason: s.Reason, Tenant: s.Tenant, Name: s.Name,
			Kept: s.Kept, Skipped: s.Skipped, PerTenant: l.PerTenant, Node: l.Node})
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func bar(done, total time.Duration) string {
	const width = 20
	n := width
	if total > 0 {
		n = int(float64(width) * done.Seconds() / total.Seconds())
	}
	n = min(max(n, 0), width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// failedCollectors names the collectors whose last run failed, from the exporter's own
// quota_exporter_scrape_collector_success series.
func failedCollectors(mfs []*dto.MetricFamily) []string {
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != series.CollectorSuccess.Name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetGauge().GetValue() != 0 {
				continue
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "collector" {
					out = append(out, "collector "+l.GetValue()+" failed; findings that need it may be missing (see the log)")
				}
			}
		}
	}
	return out
}

// permissionErrors sums the exporter's quota_exporter_read_errors_total{reason="permission"}.
func permissionErrors(mfs []*dto.MetricFamily) float64 {
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != series.ReadErrors.Name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == "permission" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
