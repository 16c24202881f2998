//go:build linux

package collector

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/fdbudget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/source"
)

// Config is everything the collectors are configured with; main fills it from flags.
type Config struct {
	ProcPath, SysPath            string
	CgroupInclude, CgroupExclude *regexp.Regexp
	// BareContainerRuntime names the runtime of bare 64-hex container cgroups (cgroupfs driver).
	BareContainerRuntime string
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
	Cgroups   *source.Cgroups
	Processes *source.Processes
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
}

// NewEnv finds the cgroup hierarchies and prepares the sources.
func NewEnv(cfg Config, logger *slog.Logger) (*Env, error) {
	errs := NewErrorCounter(logger)
	env := &Env{Config: cfg, Logger: logger, Errors: errs, Stuck: &StuckReads{}, PodNames: newPodNames(cfg.PodLogsPath, cfg.ProcPath),
		Descriptors: fdbudget.FromRlimit()}
	opts := source.Options{ProcPath: cfg.ProcPath, SysPath: cfg.SysPath, Include: cfg.CgroupInclude, Exclude: cfg.CgroupExclude,
		BareRuntime: cfg.BareContainerRuntime, Gate: env.Stuck.Gate(source.DiscoveryErrors)}
	if env.PodNames != nil {
		opts.Names = env.PodNames
	}
	var err error
	if env.Cgroups, err = source.NewCgroups(opts, logger, errs); err != nil {
		return nil, err
	}
	env.Discovery = DiscoveryStats{cgroups: env.Cgroups}
	filter := source.Filter{MinResident: cfg.ProcessMinResident, Include: cfg.ProcessInclude, Exclude: cfg.ProcessExclude}
	if env.Processes, err = source.NewProcesses(cfg.ProcPath, env.Cgroups, errs, env.Stuck.Gate(source.ProcessErrors), filter); err != nil {
		return nil, fmt.Errorf("process source: %w", err)
	}
	return env, nil
}
