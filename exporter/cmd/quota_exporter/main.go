//go:build linux

// Command quota_exporter serves Prometheus metrics about cgroup CPU quotas, memory limits,
// throttling and the runtimes (JVM, Go, glibc malloc) that run under them.
package main

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"

	"github.com/quota-exporter/quota_exporter/exporter/collector"
)

// defaultListenAddress: 9100-9999 of Prometheus's default port allocations is exhausted;
// 10137 lies in the range where new exporters are allocated.
const defaultListenAddress = ":10137"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	app := kingpin.New("quota_exporter", "Prometheus exporter for cgroup CPU quotas, memory limits, throttling and the runtimes under them.")
	sf := addServeFlags(app)
	logConfig := &promslog.Config{}
	promslogflag.AddFlags(app, logConfig)
	collectorFlags := collector.AddFlags(app)
	renamed := []*renamedFlag{
		renamedBool(app, "collector.effective", "collector.binding", collectorFlags.Enabled("binding")),
		// node_exporter's flag: nothing is read through a host root (a process's own files are
		// read through <procfs>/<pid>/root), but DaemonSets that pass it must keep starting.
		ignoredString(app, "path.rootfs"),
	}
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

	cfg, err := collectorFlags.Config()
	if err != nil {
		logger.Error("invalid flag", "err", err)
		if command == diag.cmd.FullCommand() {
			return diagnoseCannotRun
		}
		return 2
	}
	if command == diag.cmd.FullCommand() {
		return diag.run(cfg, collectorFlags.Collectors(), *sf.scrapeTimeout, logger)
	}

	return sf.serve(cfg, collectorFlags.Collectors(), logger)
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

// slogAdapter lets promhttp log through slog.
type slogAdapter struct {
	l interface{ Error(string, ...any) }
}

func (a slogAdapter) Println(v ...any) { a.l.Error(fmt.Sprint(v...)) }
