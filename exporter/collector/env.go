//go:build linux

package collector

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
	"github.com/quota-exporter/quota_exporter/exporter/internal/fdbudget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/processes"
)

func init() {
	addFlags(func(app *kingpin.Application, f *Flags) {
		app.Flag("path.procfs", "procfs mountpoint.").Default("/proc").StringVar(&f.cfg.ProcPath)
		app.Flag("path.sysfs", "sysfs mountpoint (cgroups are found under <sysfs>/fs/cgroup via mountinfo).").Default("/sys").StringVar(&f.cfg.SysPath)
		f.regexpFlag(app, "cgroup.include", "Regexp of cgroup paths to watch (matched against the whole path).", ".*", func(c *Config) **regexp.Regexp { return &c.CgroupInclude })
		f.regexpFlag(app, "cgroup.exclude", "Regexp of cgroup paths not to watch (matched against the whole path).", "", func(c *Config) **regexp.Regexp { return &c.CgroupExclude })
		app.Flag("cgroup.check-interval", "How often, between scrapes, the cgroup directories are listed to find cgroups that came or went (for the throttle sampler and the OOM watcher; a change is walked at once).").Default(cgroups.CheckEvery.String()).DurationVar(&f.cfg.CgroupCheckEvery)
		app.Flag("cgroup.bare-container-runtime", "Runtime prefix for container cgroups named by a bare 64-hex id (Kubernetes cgroupfs driver): containerd, cri-o or docker.").Default("containerd").EnumVar(&f.cfg.BareContainerRuntime, "containerd", "cri-o", "docker")
		minRes := app.Flag("process.min-resident", "Export processes that are neither JVM nor Go when their resident memory is at least this.").Default("64MiB").Bytes()
		f.finish = append(f.finish, func(c *Config) error { c.ProcessMinResident = uint64(*minRes); return nil })
		f.regexpFlag(app, "process.include", "Regexp of process names to export (whole name).", ".*", func(c *Config) **regexp.Regexp { return &c.ProcessInclude })
		f.regexpFlag(app, "process.exclude", "Regexp of process names not to export (whole name).", "", func(c *Config) **regexp.Regexp { return &c.ProcessExclude })
	})
}

// Config is everything the collectors are configured with; main fills it from flags.
type Config struct {
	ProcPath, SysPath            string
	CgroupInclude, CgroupExclude *regexp.Regexp
	// BareContainerRuntime names the runtime of bare 64-hex container cgroups (cgroupfs driver).
	BareContainerRuntime string
	// CgroupCheckEvery is the cgroup source's rediscovery period between scrapes; 0 means
	// cgroups.CheckEvery.
	CgroupCheckEvery time.Duration
	// ThrottleWindow is the per-second sampler's period.
	ThrottleWindow time.Duration
	// ThrottleFullHistograms exports every bucket of both per-window histograms; by
	// default only the ratio's alert thresholds (the per-container series budget).
	ThrottleFullHistograms bool
	// MemoryDetail adds memory.stat types, memory.events, the peak and memory.high to the memory
	// collector (7–13 more series per cgroup, outside the default series budget).
	MemoryDetail bool
	// Process collectors.
	ProcessMinResident             uint64
	ProcessInclude, ProcessExclude *regexp.Regexp
	SmapsInterval                  time.Duration
	// PodLogsPath is the host's /var/log, where the kubelet's pods/ and containers/
	// directories name pods and containers; "" leaves the names out.
	PodLogsPath string
	// OOMRetention is how long the OOM kills of a removed cgroup are still exported;
	// 0 means oomwatch.DefaultRetention.
	OOMRetention time.Duration
	// GoPauseMaxProbes caps the gopause collector's uprobes node-wide and
	// GoPausePausesPerSecond each process's pauses through the shared ring buffer; 0 means
	// gopause.DefaultMaxProbes and gopause.DefaultPausesPerSecond.
	GoPauseMaxProbes, GoPausePausesPerSecond int
	// GoPausePerfEventUprobes: perf-event uprobes even where uprobe_multi links exist (no
	// flag: the tests' way to the only kind kernels before 6.10 get).
	GoPausePerfEventUprobes bool
	// Budgets bound what each tenant (pod, container, top-level cgroup) and the node may
	// cost: cgroups exported, processes inspected, series, sampled cgroups, stuck reads (the
	// --budget.* flags); nil means budget.Defaults().
	Budgets *budget.Limits
}

// Env is what the collectors share, created once per exporter by NewEnv: configuration,
// logging, the error counter and the two sources. The cgroup source owns discovery and the
// cgroups' slowly changing CPU settings; the process source owns the process list, each
// process's typed per-reader state and the runtime readers' caches, and forgets exited
// processes in all of them. Collectors hold no state about cgroups or processes that another
// collector needs.
type Env struct {
	Config    Config
	Logger    *slog.Logger
	Errors    *ErrorCounter
	Cgroups   *cgroups.Source
	Processes *processes.Source
	// Stuck owns the stuck-read gates (procread.Gate) of the sources and collectors and
	// exports their stuck reads; register it with the exporter's own registry.
	Stuck *StuckReads
	// PodNames resolves Kubernetes names for the cgroup source and exports the resolver's
	// own metrics; register it with the exporter's own registry.
	PodNames *PodNames
	// Discovery exports what discovery leaves out (cgroups below containers, conmon) and
	// whether the exporter sees the host's processes; register it with the exporter's own registry.
	Discovery DiscoveryStats
	// Descriptors is the budget of descriptors the throttle sampler (open cpu.stat files) and
	// the v1 OOM watcher (eventfds) hold together.
	Descriptors *fdbudget.Budget
	// Budgets keeps the books of the per-tenant budgets (what each left out, by reason) and
	// exports them; register it with the exporter's own registry.
	Budgets *Budgets
}

// NewEnv finds the cgroup hierarchies and prepares the sources.
func NewEnv(cfg Config, logger *slog.Logger) (*Env, error) {
	errs := NewErrorCounter(logger)
	limits := budget.Defaults()
	if cfg.Budgets != nil {
		limits = *cfg.Budgets
	}
	env := &Env{Config: cfg, Logger: logger, Errors: errs, Stuck: &StuckReads{}, PodNames: newPodNames(cfg.PodLogsPath, cfg.ProcPath),
		Descriptors: fdbudget.FromRlimit(), Budgets: newBudgets(limits, logger)}
	opts := cgroups.Options{ProcPath: cfg.ProcPath, SysPath: cfg.SysPath, Include: cfg.CgroupInclude, Exclude: cfg.CgroupExclude,
		BareRuntime: cfg.BareContainerRuntime, CheckEvery: cfg.CgroupCheckEvery, Gate: env.Stuck.Gate(cgroups.DiscoveryErrors), Budgets: env.Budgets.Book}
	if env.PodNames != nil {
		opts.Names = env.PodNames.Namer
	}
	var err error
	if env.Cgroups, err = cgroups.New(opts, logger); err != nil {
		return nil, err
	}
	env.Discovery = DiscoveryStats{cgroups: env.Cgroups}
	filter := processes.Filter{MinResident: cfg.ProcessMinResident, Include: cfg.ProcessInclude, Exclude: cfg.ProcessExclude}
	if env.Processes, err = processes.New(cfg.ProcPath, env.Cgroups, env.Stuck.Gate(processes.ProcessErrors), filter); err != nil {
		return nil, fmt.Errorf("process source: %w", err)
	}
	env.Processes.Budgets = env.Budgets.Book
	errs.follow(cgroups.DiscoveryErrors, env.Cgroups.ReadErrors)
	errs.follow(processes.ProcessErrors, env.Processes.ReadErrors)
	env.Budgets.watch(env.Cgroups)
	return env, nil
}
