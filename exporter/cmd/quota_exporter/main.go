//go:build linux

// Command quota_exporter serves Prometheus metrics about cgroup CPU quotas, memory limits,
// throttling and the runtimes (JVM, Go, glibc malloc) that run under them.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	webflag "github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/quota-exporter/quota_exporter/exporter/collector"
	"github.com/quota-exporter/quota_exporter/exporter/internal/gopause"
)

// defaultListenAddress: 9100-9999 of Prometheus's default port allocations is exhausted;
// 10137 lies in the range where new exporters are allocated.
const defaultListenAddress = ":10137"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	app := kingpin.New("quota_exporter", "Prometheus exporter for cgroup CPU quotas, memory limits, throttling and the runtimes under them.")
	var (
		metricsPath = app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").String()
		maxRequests = app.Flag("web.max-requests", "Maximum number of scrapes collected and encoded at once (beyond: 503). A slot is held while the response is built, not while a client reads it. Use 0 to disable.").Default("40").Int()
		writeTO     = app.Flag("web.write-timeout", "Time a client has to read a built response (then the connection is closed); slow or stalled clients hold memory for at most this long, never a scrape slot.").Default("30s").Duration()
		noExporter  = app.Flag("web.disable-exporter-metrics", "Exclude the exporter's own go_* and process_* metrics.").Bool()
		scrapeTO    = app.Flag("scrape.timeout", "Time bound of one scrape; collectors still reading then report failure.").Default("10s").Duration()
		procPath    = app.Flag("path.procfs", "procfs mountpoint.").Default("/proc").String()
		sysPath     = app.Flag("path.sysfs", "sysfs mountpoint (cgroups are found under <sysfs>/fs/cgroup via mountinfo).").Default("/sys").String()
		_           = app.Flag("path.rootfs", "rootfs mountpoint (accepted like node_exporter's; nothing is read through it: processes' own files, such as JVM perf data, are read through <procfs>/<pid>/root).").Default("/").String()
		include     = app.Flag("cgroup.include", "Regexp of cgroup paths to watch (matched against the whole path).").Default(".*").String()
		exclude     = app.Flag("cgroup.exclude", "Regexp of cgroup paths not to watch (matched against the whole path).").Default("").String()
		bareRuntime = app.Flag("cgroup.bare-container-runtime", "Runtime prefix for container cgroups named by a bare 64-hex id (Kubernetes cgroupfs driver): containerd, cri-o or docker.").Default("containerd").Enum("containerd", "cri-o", "docker")
		window      = app.Flag("throttle.window", "Window of the background throttling sampler that feeds quota_cpu_throttled_window_* histograms.").Default("1s").Duration()
		memDetail   = app.Flag("memory.detail", "Add memory.stat by type (anon, file, kernel, sock, shmem, anon_thp), memory.events (high, max, oom, oom_group_kill; v2), the peak usage and memory.high to the memory collector: what an RSS-creep investigation needs, 7-13 more series per cgroup than the default budget.").Bool()
		fullHists   = app.Flag("throttle.full-histograms", "Export every bucket of quota_cpu_throttled_window_ratio and the quota_cpu_throttled_window_seconds histogram (by default: the ratio's le=0.5 and 0.9 buckets only, the per-container series budget of docs/metrics.md).").Bool()
		minRes      = app.Flag("process.min-resident", "Export processes that are neither JVM nor Go when their resident memory is at least this.").Default("64MiB").Bytes()
		procInc     = app.Flag("process.include", "Regexp of process names to export (whole name).").Default(".*").String()
		procExc     = app.Flag("process.exclude", "Regexp of process names not to export (whole name).").Default("").String()
		podLogs     = app.Flag("path.podlogs", "The host's /var/log: the kubelet's pods/ and containers/ directories there name the pods and containers (namespace, pod, container labels). Only directory names are read. Empty: no names.").Default("/var/log").String()
		smapsEvery  = app.Flag("process.smaps-interval", "Minimum interval between smaps reads of one process (they walk its page tables).").Default("5m").Duration()
		pauseProbes = app.Flag("gopause.max-probes", "Cap on the gopause collector's uprobes on this node (2 or 3 per Go process); processes beyond it are refused and counted in quota_exporter_gopause_refused_processes_total{reason=\"node_probe_limit\"}.").Default(strconv.Itoa(gopause.DefaultMaxProbes)).Int()
		pauseRate   = app.Flag("gopause.pauses-per-second", "Pauses one process may send per second through the gopause collector's shared ring buffer; beyond it they are dropped in the kernel and counted in quota_exporter_gopause_limited_pauses_total.").Default(strconv.Itoa(gopause.DefaultPausesPerSecond)).Int()
		memRatio    = app.Flag("runtime.gomemlimit-ratio", "Set the Go runtime's soft memory limit (GOMEMLIMIT) to this share of the exporter's own cgroup memory limit (the lowest on its path, cgroup v1 or v2), so the heap is collected harder before the OOM killer comes. 0: leave it alone. A GOMEMLIMIT environment variable wins.").Default("0.9").Float64()
		oomRetain   = app.Flag("oom.retention", "How long quota_memory_oom_kills_total of a removed cgroup is still exported (oom collector): a few scrape intervals plus the windows of increase() in the alerts.").Default("15m").Duration()
	)
	toolkitFlags := webflag.AddFlags(app, defaultListenAddress)
	logConfig := &promslog.Config{}
	promslogflag.AddFlags(app, logConfig)
	enabled := map[string]*bool{}
	for _, name := range collector.Available() {
		def := "false"
		if collector.DefaultEnabled(name) {
			def = "true"
		}
		enabled[name] = app.Flag("collector."+name, fmt.Sprintf("Enable the %s collector: %s (default: %s).", name, collector.Help(name), map[string]string{"true": "enabled", "false": "disabled"}[def])).Default(def).Bool()
	}
	renamed := []*renamedFlag{renamedBool(app, "collector.effective", "collector.binding", enabled["binding"])}
	app.Version(version.Print("quota_exporter"))
	app.HelpFlag.Short('h')
	app.Command("serve", "Serve the metrics (the default).").Default()
	diag := addDiagnoseCommand(app)
	command, err := app.Parse(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if slices.Contains(args, diag.cmd.FullCommand()) {
			return diagnoseCannotRun
		}
		return 2
	}
	logger := promslog.New(logConfig)
	resolveRenamed(logger, append(renamed, diag.renamed...)...)

	cfg := collector.Config{
		ProcPath: *procPath, SysPath: *sysPath,
		BareContainerRuntime: *bareRuntime, ThrottleWindow: *window,
		ProcessMinResident: uint64(*minRes), SmapsInterval: *smapsEvery,
		PodLogsPath: *podLogs, ThrottleFullHistograms: *fullHists, MemoryDetail: *memDetail,
		OOMRetention: *oomRetain, GoPauseMaxProbes: *pauseProbes, GoPausePausesPerSecond: *pauseRate,
	}
	for _, re := range []struct {
		dst  **regexp.Regexp
		expr string
		flag string
	}{{&cfg.CgroupInclude, *include, "cgroup.include"}, {&cfg.CgroupExclude, *exclude, "cgroup.exclude"},
		{&cfg.ProcessInclude, *procInc, "process.include"}, {&cfg.ProcessExclude, *procExc, "process.exclude"}} {
		if *re.dst, err = compileAnchored(re.expr); err != nil {
			logger.Error("invalid regexp", "flag", re.flag, "err", err)
			if command == diag.cmd.FullCommand() {
				return diagnoseCannotRun
			}
			return 2
		}
	}
	if command == diag.cmd.FullCommand() {
		return diag.run(cfg, enabledCollectors(enabled), *scrapeTO, logger)
	}

	logger.Info("starting quota_exporter", "version", version.Info(), "build_context", version.BuildContext())
	setMemoryLimit(*memRatio, logger)
	// Go's runtime already does this at start since 1.19; explicit, because the sampler's
	// descriptor budget depends on it.
	if err := raiseFileLimit(); err != nil {
		logger.Warn("cannot raise the soft open-files limit to the hard limit", "err", err)
	}
	env, err := collector.NewEnv(cfg, logger)
	if err != nil {
		logger.Error("cannot find cgroup hierarchies", "procfs", *procPath, "sysfs", *sysPath, "err", err)
		return 1
	}
	names := enabledCollectors(enabled)
	logger.Info("enabled collectors", "collectors", strings.Join(names, ","))
	set, err := collector.NewSet(env, names)
	if err != nil {
		logger.Error("cannot create collectors", "err", err)
		return 1
	}
	defer set.Close()

	exporterReg := prometheus.NewRegistry()
	exporterReg.MustRegister(versioncollector.NewCollector("quota_exporter"), env.Errors, env.Stuck, env.PodNames, env.Discovery)
	if !*noExporter {
		exporterReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	slots := newScrapeSlots(*maxRequests, *scrapeTO)
	handler := scrapeHandler(func(ctx context.Context) prometheus.Gatherer {
		return disjointGatherers{exporterReg, set.Gatherer(ctx, *scrapeTO)}
	}, exporterReg, slots, *writeTO, logger)
	if !*noExporter {
		handler = promhttp.InstrumentMetricHandler(exporterReg, handler)
	}
	mux := http.NewServeMux()
	mux.Handle(*metricsPath, handler)
	mux.Handle(healthyPath, slots.healthy())
	mux.Handle(readyPath, ready())
	if *metricsPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "quota_exporter",
			Description: "cgroup CPU quotas, memory limits, per-second throttling, and the JVM, Go and glibc malloc behaviour under them",
			Version:     version.Info(),
			Links:       []web.LandingLinks{{Address: *metricsPath, Text: "Metrics"}},
		})
		if err != nil {
			logger.Error("landing page", "err", err)
			return 1
		}
		mux.Handle("/", landing)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Requests' contexts end at SIGTERM, so a scrape waiting on a collector returns at once.
	srv := newServer(mux, *scrapeTO, *writeTO)
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	errc := make(chan error, 1)
	go func() { errc <- web.ListenAndServe(srv, toolkitFlags, logger) }()
	select {
	case err := <-errc:
		logger.Error("server stopped", "err", err)
		return 1
	case <-ctx.Done():
		logger.Info("shutting down")
		// Shutdown (2 s) plus set.Close (closeWait, 2 s) stay within the 5 s a kubelet or
		// systemd gives before SIGKILL, whatever is blocked.
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
		return 0
	}
}

// disjointGatherers concatenates the families of gatherers whose metric names never
// overlap (the exporter's own registry and the collector set), sorted by name. Unlike
// prometheus.Gatherers it does not re-hash and re-check every metric of the shared
// collection for every request: with 200 concurrent scrapes of 1 000 cgroups that check
// was most of the per-request cost.
type disjointGatherers []prometheus.Gatherer

func (d disjointGatherers) Gather() ([]*dto.MetricFamily, error) {
	var out []*dto.MetricFamily
	var errs prometheus.MultiError
	for _, g := range d {
		mfs, err := g.Gather()
		errs.Append(err)
		out = append(out, mfs...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, errs.MaybeUnwrap()
}

// enabledCollectors lists the collectors the --collector.<name> flags enable.
func enabledCollectors(enabled map[string]*bool) []string {
	var names []string
	for _, n := range collector.Available() {
		if *enabled[n] {
			names = append(names, n)
		}
	}
	return names
}

// raiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit, as Prometheus does: the
// throttling sampler keeps one descriptor per cgroup with a quota (within a budget below
// the limit).
func raiseFileLimit() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= l.Max {
		return nil
	}
	l.Cur = l.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

// compileAnchored compiles a flag regexp that must match the whole value; "" matches nothing
// (so an empty exclude excludes nothing) and ".*" everything, which both compile to nil.
func compileAnchored(expr string) (*regexp.Regexp, error) {
	if expr == "" || expr == ".*" {
		return nil, nil
	}
	return regexp.Compile("^(?:" + expr + ")$")
}

// slogAdapter lets promhttp log through slog.
type slogAdapter struct {
	l interface{ Error(string, ...any) }
}

func (a slogAdapter) Println(v ...any) { a.l.Error(fmt.Sprint(v...)) }
