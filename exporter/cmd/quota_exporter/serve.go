//go:build linux

package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	webflag "github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/quota-exporter/quota_exporter/exporter/collector"
)

// serveFlags are the server's flags: the web endpoints, the scrape's time bound, the
// exporter's own memory limit. The collectors' flags are the collector package's.
type serveFlags struct {
	metricsPath       *string
	maxRequests       *int
	writeTimeout      *time.Duration
	maxConnections    *int
	noExporterMetrics *bool
	scrapeTimeout     *time.Duration
	memLimitRatio     *float64
	toolkit           *web.FlagConfig
}

func addServeFlags(app *kingpin.Application) *serveFlags {
	f := &serveFlags{
		metricsPath:       app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").String(),
		maxRequests:       app.Flag("web.max-requests", "Maximum number of scrapes collected and encoded at once (beyond: 503). A slot is held while the response is built, not while a client reads it. Use 0 to disable.").Default("40").Int(),
		writeTimeout:      app.Flag("web.write-timeout", "Time a client has to read a built response (then the connection is closed); slow or stalled clients hold memory for at most this long, never a scrape slot.").Default("30s").Duration(),
		maxConnections:    app.Flag("web.max-connections", "Maximum number of open connections per listen address; beyond it new connections wait in the kernel's backlog. Use 0 to disable.").Default("128").Int(),
		noExporterMetrics: app.Flag("web.disable-exporter-metrics", "Exclude the exporter's own go_* and process_* metrics.").Bool(),
		scrapeTimeout:     app.Flag("scrape.timeout", "Time bound of one scrape; collectors still reading then report failure.").Default("10s").Duration(),
		memLimitRatio:     app.Flag("runtime.gomemlimit-ratio", "Set the Go runtime's soft memory limit (GOMEMLIMIT) to this share of the exporter's own cgroup memory limit (the lowest on its path, cgroup v1 or v2), so the heap is collected harder before the OOM killer comes. 0: leave it alone. A GOMEMLIMIT environment variable wins.").Default("0.9").Float64(),
	}
	f.toolkit = webflag.AddFlags(app, defaultListenAddress)
	return f
}

// serve runs the exporter's HTTP server with the named collectors until SIGTERM.
func (f *serveFlags) serve(cfg collector.Config, names []string, logger *slog.Logger) int {
	logger.Info("starting quota_exporter", "version", version.Info(), "build_context", version.BuildContext())
	setMemoryLimit(*f.memLimitRatio, logger)
	// Go's runtime already does this at start since 1.19; explicit, because the sampler's
	// descriptor budget depends on it.
	if err := raiseFileLimit(); err != nil {
		logger.Warn("cannot raise the soft open-files limit to the hard limit", "err", err)
	}
	env, err := collector.NewEnv(cfg, logger)
	if err != nil {
		logger.Error("cannot find cgroup hierarchies", "procfs", cfg.ProcPath, "sysfs", cfg.SysPath, "err", err)
		return 1
	}
	logger.Info("enabled collectors", "collectors", strings.Join(names, ","))
	set, err := collector.NewSet(env, names)
	if err != nil {
		logger.Error("cannot create collectors", "err", err)
		return 1
	}
	defer set.Close()

	exporterReg := prometheus.NewRegistry()
	exporterReg.MustRegister(versioncollector.NewCollector("quota_exporter"), env.Errors, env.Stuck, env.PodNames, env.Discovery, env.Budgets)
	if !*f.noExporterMetrics {
		exporterReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	// Requests' contexts end at SIGTERM, so a scrape waiting on a collector returns at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slots := newScrapeSlots(*f.maxRequests, *f.scrapeTimeout)
	handler := scrapeHandler(ctx, func(ctx context.Context) prometheus.Gatherer {
		return disjointGatherers{exporterReg, set.Gatherer(ctx, *f.scrapeTimeout)}
	}, exporterReg, slots, *f.writeTimeout, logger)
	if !*f.noExporterMetrics {
		handler = promhttp.InstrumentMetricHandler(exporterReg, handler)
	}
	mux := http.NewServeMux()
	mux.Handle(*f.metricsPath, handler)
	mux.Handle(healthyPath, slots.healthy())
	mux.Handle(readyPath, ready())
	if *f.metricsPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "quota_exporter",
			Description: "cgroup CPU quotas, memory limits, per-second throttling, and the JVM, Go and glibc malloc behaviour under them",
			Version:     version.Info(),
			Links:       []web.LandingLinks{{Address: *f.metricsPath, Text: "Metrics"}},
		})
		if err != nil {
			logger.Error("landing page", "err", err)
			return 1
		}
		mux.Handle("/", landing)
	}

	srv := newServer(mux, *f.scrapeTimeout, *f.writeTimeout)
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	errc := make(chan error, 1)
	go func() { errc <- listenAndServe(srv, f.toolkit, *f.maxConnections, logger) }()
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
