//go:build linux

package cgroups

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/jvm"
	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
	"github.com/quota-exporter/quota_exporter/exporter/internal/readerr"
	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// DiscoveryMaxAge lets the collectors of one scrape (cpu, memory, the process source) share
// one walk of the hierarchies, while a scrape a few seconds later sees new cgroups.
const DiscoveryMaxAge = 500 * time.Millisecond

// settingsMaxAge: weight, shares, burst and cpuset change only when someone resizes the
// container; re-reading them every scrape was a quarter of the scrape's file reads. Discovery
// keeps the quota and memory limit as long (ProbeCache).
const settingsMaxAge = 30 * time.Second

// SettingsBudget bounds one read of a cgroup's settings files. They are kernfs files opened
// non-blocking, so they answer in microseconds; a read that does not answer in a second is
// stuck, and the cgroup's settings are skipped until it returns.
const SettingsBudget = time.Second

// DiscoveryErrors is the collector label under which the cgroup source counts the
// directories its walk could not read, whatever collectors are enabled.
const DiscoveryErrors = "discovery"

// Source discovers the watched cgroups, publishes each complete walk as an immutable
// Snapshot (with a generation and the binding limits), tells subscribers what came and went,
// and caches the cgroups' slowly changing CPU settings; shared by the collectors and the
// process source. Each fresh walk forgets the settings of cgroups that are gone.
type Source struct {
	layout *cgroupfs.Layout
	opts   WalkOptions
	// readErrors are the directories walks could not read, until ReadErrors takes them.
	readErrors readerr.Log

	// MaxAge is how long a walk serves (DiscoveryMaxAge; tests set 0 before the first walk).
	MaxAge time.Duration

	mu         sync.Mutex
	walking    *walk // the discovery in progress, if any
	expired    bool  // Expire: the next call walks
	generation uint64
	// latest is the last complete walk's snapshot (nil before one); read without mu.
	latest atomic.Pointer[Snapshot]
	subs   []*Subscription
	// stopScheduleFn ends the rediscovery schedule, which runs while subs is not empty;
	// checkEvery is its period (Options.CheckEvery).
	stopScheduleFn context.CancelFunc
	checkEvery     time.Duration

	procPath string
	names    Namer        // nil: no Kubernetes names
	budgets  *budget.Book // nil: no cgroup budget

	logger *slog.Logger
	// hostPIDs: the exporter is in the host's PID namespace (pidNamespace); dropPIDs: the
	// PIDs cgroup.procs lists are not --path.procfs's, the walk keeps none.
	hostPIDs, dropPIDs bool
	// skippedMu guards what logSkipped said last.
	skippedMu     sync.Mutex
	skippedLogged int
	skippedAt     time.Time

	// settingsMu guards settings, never a read: each cgroup's files are read by one caller
	// at a time (settingsReads, keyed by path), outside the lock, under SettingsBudget and
	// the settings gate, and concurrent callers wait for that read only.
	settingsMu    sync.Mutex
	settings      map[string]CPUSettings // by cgroup path
	settingsReads singleflight.Group
	settingsGate  *procread.Gate // when the discovery gate (opts.Gate) is not set
}

// Options configure the cgroup source.
type Options struct {
	ProcPath, SysPath string
	// Include and Exclude filter the watched cgroups by path (nil: all).
	Include, Exclude *regexp.Regexp
	// BareRuntime names the runtime of bare 64-hex container cgroups (cgroupfs driver);
	// "" is containerd.
	BareRuntime string
	// Names gives cgroups their Kubernetes names; nil: none.
	Names Namer
	// Gate holds the stuck keys of discovery's reads; nil: a gate of its own.
	Gate *procread.Gate
	// Budgets, if set, bounds the cgroups each walk publishes per tenant and node-wide
	// (budget.Cgroups) and records what it left out.
	Budgets *budget.Book
	// CheckEvery is the rediscovery schedule's period (schedule.go); 0 means CheckEvery.
	CheckEvery time.Duration
}

// New reads the hierarchy layout from mountinfo.
func New(o Options, logger *slog.Logger) (*Source, error) {
	layout, err := cgroupfs.ReadLayout(o.ProcPath, o.SysPath)
	if err != nil {
		return nil, err
	}
	if layout.MalformedMountLines > 0 {
		logger.Warn("skipped malformed mountinfo lines", "count", layout.MalformedMountLines)
	}
	if layout.OutsideNamespace {
		logger.Info("cgroup mounts lie outside the exporter's cgroup namespace; treating them as the host hierarchy (host /sys/fs/cgroup mounted into a container)")
	}
	logger.Info("cgroup layout", "layout", layout.String())
	host, pidsUsable := pidNamespace(o.ProcPath)
	if !host {
		logger.Warn("not in the host's PID namespace (no hostPID): cgroup.procs hides the host's processes, so cgroups are found by their limits and their Kubernetes pod, container or Docker path only; cgroups with neither (systemd services without a limit) are not seen, and a sandbox is told from a container by its link in the kubelet's log directory alone")
	}
	if !pidsUsable {
		logger.Warn("the PIDs cgroup.procs lists in the exporter's PID namespace are not those of --path.procfs: no per-process series (run with hostPID)", "procfs", o.ProcPath)
	}
	bare := o.BareRuntime
	if bare == "" {
		bare = cgroupid.RuntimeContainerd
	}
	checkEvery := o.CheckEvery
	if checkEvery <= 0 {
		checkEvery = CheckEvery
	}
	return &Source{
		layout: layout,
		opts: WalkOptions{Keep: pathFilter(o.Include, o.Exclude), BareRuntime: bare, Gate: o.Gate,
			Cache: &ProbeCache{MaxAge: settingsMaxAge}},
		names:        o.Names,
		procPath:     o.ProcPath,
		logger:       logger,
		hostPIDs:     host,
		dropPIDs:     !pidsUsable,
		budgets:      o.Budgets,
		MaxAge:       DiscoveryMaxAge,
		checkEvery:   checkEvery,
		settings:     map[string]CPUSettings{},
		settingsGate: procread.NewGate(DiscoveryErrors),
	}, nil
}

// Expire makes the next Cgroups call walk again, whatever MaxAge (a new scrape, in tests and
// benchmarks).
func (s *Source) Expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expired = true
}

// Layout is the hierarchy layout found at start.
func (s *Source) Layout() *cgroupfs.Layout { return s.layout }

// Snapshot returns the last walk when younger than MaxAge, else walks the hierarchies.
// The walk's unreadable directories are kept for ReadErrors (collector "discovery") when the
// walk finds them, and returned in Errs marked as counted, so a collector can mark itself
// failed without counting them again. Concurrent callers share one walk, and each waits for
// it only until its own ctx ends (then it gets an empty snapshot, Generation 0, and a
// timeout): no caller waits on a lock held across the walk's system calls. A walk cut short
// by its ctx is returned to its callers but not published (Generation 0).
//
// Under a context from PinWalk, every call returns the first published walk any of them got.
func (s *Source) Snapshot(ctx context.Context) *Snapshot {
	pin, _ := ctx.Value(pinKey{}).(*atomic.Pointer[Snapshot])
	if pin == nil {
		return s.snapshot(ctx)
	}
	if snap := pin.Load(); snap != nil {
		return snap
	}
	snap := s.snapshot(ctx)
	if snap.Generation != 0 && !pin.CompareAndSwap(nil, snap) {
		return pin.Load()
	}
	return snap
}

type pinKey struct{}

// PinWalk returns a context under which Snapshot gives every caller one walk: the
// collectors of a scrape run concurrently, and the rediscovery schedule may publish a walk
// between two of them. Without the pin a container removed in between was exported live by
// one collector (under the names of the walk that first saw it) and as gone by another.
func PinWalk(ctx context.Context) context.Context {
	return context.WithValue(ctx, pinKey{}, new(atomic.Pointer[Snapshot]))
}

func (s *Source) snapshot(ctx context.Context) *Snapshot {
	s.mu.Lock()
	if snap := s.latest.Load(); snap != nil && !s.expired && time.Since(snap.At) < s.MaxAge {
		s.mu.Unlock()
		return snap
	}
	w := s.walking
	if w == nil {
		w = &walk{done: make(chan struct{})}
		s.walking = w
		go s.runWalk(ctx, w)
	}
	s.mu.Unlock()
	select {
	case <-w.done:
		return w.snap
	case <-ctx.Done():
		return &Snapshot{Errs: []WalkError{{Path: "/", Err: Counted{fmt.Errorf("waiting for cgroup discovery: %w", procread.ErrTimeout)}}}}
	}
}

// ReadErrors takes the directories and files the walks could not read since the last call, by
// reason: the exporter counts them under collector DiscoveryErrors, whatever collectors are
// enabled.
func (s *Source) ReadErrors() []readerr.Batch { return s.readErrors.Take() }

// Cgroups is Snapshot's cgroups and walk errors.
func (s *Source) Cgroups(ctx context.Context) ([]cgroupid.Cgroup, []WalkError) {
	snap := s.Snapshot(ctx)
	return snap.Cgroups, snap.Errs
}

// walk is one discovery shared by the callers that arrive while it runs.
type walk struct {
	done chan struct{}
	snap *Snapshot
}

func (s *Source) runWalk(ctx context.Context, w *walk) {
	d := DiscoverAll(ctx, s.layout, s.opts)
	// Every process the walk listed started by now (0: unknown, no check).
	listedBy, _ := kernel.UptimeTicks(s.procPath)
	cgs, errs := d.Cgroups, d.Errs
	if s.dropPIDs {
		for i := range cgs {
			cgs[i].PIDs = nil
		}
	}
	if s.names != nil {
		s.names.Name(cgs)
	}
	s.logSkipped(d.Skipped)
	for i, we := range errs {
		s.readErrors.Add(we.Path, we.Err)
		errs[i].Err = Counted{we.Err}
	}
	cgs = s.withinBudget(cgs)
	labelPaths(cgs)
	exported, unlinked := splitUnlinked(cgs)
	w.snap = newSnapshot(0, exported, errs)
	w.snap.Unlinked = unlinked
	w.snap.ListedBy = listedBy
	w.snap.Skipped = d.Skipped
	s.mu.Lock()
	s.walking = nil
	var subs []*Subscription
	if ctx.Err() == nil { // incomplete walks are not published
		s.generation++
		w.snap.Generation = s.generation
		s.latest.Store(w.snap)
		s.expired = false
		subs = s.subs
	}
	s.mu.Unlock()
	for _, sub := range subs {
		sub.notify()
	}
	if ctx.Err() == nil {
		s.forgetSettings(cgs)
	}
	close(w.done)
}

// HostPIDNamespace reports whether the exporter runs in the host's PID namespace, where
// cgroup.procs lists every process (see pidNamespace).
func (s *Source) HostPIDNamespace() bool { return s.hostPIDs }

// initPIDNamespace is the inode of the kernel's initial PID namespace (PROC_PID_INIT_INO,
// include/linux/proc_ns.h): the host's, fixed since Linux 3.8.
const initPIDNamespace = "pid:[4026531836]"

// pidNamespace tells whether the exporter runs in the host's PID namespace (outside it,
// cgroup.procs leaves out the processes it cannot see on v1 and lists 0 for them on v2:
// cgroup_procs_show prints task_pid_vnr), and whether the PIDs cgroup.procs lists are those
// procPath shows: <procPath>/self names the exporter by the PID that procfs's namespace gives
// it. What cannot be read is taken as yes (a test's made-up procfs has no self).
func pidNamespace(procPath string) (host, pidsUsable bool) {
	ns, err := os.Readlink("/proc/self/ns/pid")
	host = err != nil || ns == initPIDNamespace
	self, err := os.Readlink(filepath.Join(procPath, "self"))
	pidsUsable = err != nil || self == strconv.Itoa(os.Getpid())
	return host, pidsUsable
}

// skippedLogEvery bounds the log lines about cgroups below containers.
const skippedLogEvery = 5 * time.Minute

// logSkipped logs one line when a walk finds more cgroups below containers than the last one
// logged, at most every skippedLogEvery; the count is exported by the snapshot's Skipped.
func (s *Source) logSkipped(sk Skipped) {
	s.skippedMu.Lock()
	defer s.skippedMu.Unlock()
	if sk.BelowContainer <= s.skippedLogged || time.Since(s.skippedAt) < skippedLogEvery {
		if sk.BelowContainer < s.skippedLogged {
			s.skippedLogged = sk.BelowContainer
		}
		return
	}
	s.skippedLogged, s.skippedAt = sk.BelowContainer, time.Now()
	s.logger.Info("cgroups below a container are the container's: their processes count as the container's, their own series are not exported",
		"cgroups", sk.BelowContainer, "example", tenantstr.Label(sk.Example))
}

// labelPaths gives each cgroup its path as a label value unique among cgs: a tenant may name
// two of its cgroups alike but for a control character, which cleaning replaces.
func labelPaths(cgs []cgroupid.Cgroup) {
	paths := make([]string, len(cgs))
	for i := range cgs {
		paths[i] = cgs[i].Path
	}
	for i, l := range tenantstr.Unique(paths) {
		cgs[i].Label = l
	}
}

// withinBudget keeps the cgroups the cgroup budget allows (each tenant's top ones first) and
// records the tenants it cut. What is left out is not exported, sampled, watched for OOM
// kills or listed for processes: for the rest of the exporter it does not exist.
func (s *Source) withinBudget(cgs []cgroupid.Cgroup) []cgroupid.Cgroup {
	if s.budgets == nil {
		return cgs
	}
	keep, skips := budget.AllotCgroups(cgs, s.budgets.Limits().Cgroups, budget.Cgroups)
	cgs = budget.Keep(cgs, keep)
	s.budgets.Pass(budget.Cgroups, len(cgs), skips)
	return cgs
}

// CPUSettings are the slowly changing CPU settings of a cgroup. A zero-valued Has* means the
// file does not exist (old kernel, v2 root).
type CPUSettings struct {
	at                           time.Time
	BurstUS, Weight              uint64
	Shares                       uint64 // v1 cpu.shares as read (weight is converted from it)
	CPUs                         int
	HasBurst, HasWeight, HasCPUs bool
	unreported                   error // of the last read, until the cpu collector takes it
}

// Settings returns the cached CPU settings of a cgroup, re-reading them when older than
// settingsMaxAge. The cpu collector and the JVM reader (which needs shares or weight) share
// them: one read of each file per 30 s. The read's error goes to the cpu collector (the
// first caller with report set), whoever read: it is counted once per read.
//
// No lock is held across the read: concurrent callers for one cgroup share one read and
// wait for it at most SettingsBudget. A read that outlives the budget is counted once as a
// timeout and skipped by the gate while stuck (quota_exporter_stuck_reads{collector="discovery",
// kind="cpu settings"}); until it returns, callers get the last settings read (or none)
// at once, without an error.
func (s *Source) Settings(cg cgroupid.Cgroup, report bool) (CPUSettings, error) {
	s.settingsMu.Lock()
	st, ok := s.settings[cg.Path]
	if !ok || time.Since(st.at) >= settingsMaxAge {
		s.settingsMu.Unlock()
		// The read returns within SettingsBudget; callers that arrive meanwhile share it.
		_, _, _ = s.settingsReads.Do(cg.Path, func() (any, error) {
			s.readSettings(cg)
			return nil, nil
		})
		s.settingsMu.Lock()
		st, ok = s.settings[cg.Path]
	}
	defer s.settingsMu.Unlock()
	var err error
	if ok && report {
		err, st.unreported = st.unreported, nil
		s.settings[cg.Path] = st
	}
	return st, err
}

// readSettings reads cg's settings under the budget and the gate and stores the result.
func (s *Source) readSettings(cg cgroupid.Cgroup) {
	type result struct {
		st  CPUSettings
		err error
	}
	gate := s.opts.Gate
	if gate == nil {
		gate = s.settingsGate
	}
	ctx, cancel := context.WithTimeout(procread.WithPool(context.Background(), procread.CgroupFiles, ""), SettingsBudget)
	res, gateErr := procread.GateDo(ctx, gate, "cpu settings "+cg.Path, "cpu settings", func() (result, error) {
		st, err := readCPUSettings(s.layout, cg)
		return result{st, err}, nil
	})
	cancel()
	s.settingsMu.Lock()
	defer s.settingsMu.Unlock()
	st := s.settings[cg.Path] // the last settings read, or none; still due for a re-read
	switch {
	case errors.Is(gateErr, procread.ErrStuck): // counted when it timed out
	case gateErr != nil:
		st.unreported = gateErr
	default:
		st = res.st
		st.unreported = res.err
	}
	s.settings[cg.Path] = st
}

// forgetSettings drops the settings of cgroups that are gone.
func (s *Source) forgetSettings(cgs []cgroupid.Cgroup) {
	seen := make(map[string]bool, len(cgs))
	for _, cg := range cgs {
		seen[cg.Path] = true
	}
	s.settingsMu.Lock()
	defer s.settingsMu.Unlock()
	for p := range s.settings {
		if !seen[p] {
			delete(s.settings, p)
		}
	}
}

func readCPUSettings(l *cgroupfs.Layout, cg cgroupid.Cgroup) (CPUSettings, error) {
	st := CPUSettings{at: time.Now()}
	if l.CPU == nil {
		return st, nil
	}
	var errs []error
	optional := func(err error) bool {
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		return err == nil
	}
	dir := l.CPU.Dir(cg.Path)
	var err error
	st.BurstUS, err = l.CPU.ReadCPUBurst(dir)
	st.HasBurst = optional(err)
	if cg.ThrottleSubgroup != "" {
		// crun's subgroup has a quota of its own (with containerd, the only one): its burst is
		// the container's when larger, as its throttling counters are (CPUStat.MaxThrottling).
		if sub, err := l.CPU.ReadCPUBurst(l.CPU.Dir(cg.ThrottleSubgroup)); optional(err) {
			st.BurstUS, st.HasBurst = max(st.BurstUS, sub), true
		}
	}
	st.Weight, st.Shares, err = l.CPU.ReadCPUWeight(dir)
	st.HasWeight = optional(err)
	if l.CPUSet != nil {
		if d := l.CPUSet.Dir(cg.Path); d != "" {
			st.CPUs, err = l.CPUSet.ReadCPUSetCount(d)
			st.HasCPUs = optional(err) && st.CPUs > 0
		}
	}
	return st, errors.Join(errs...)
}

func pathFilter(include, exclude *regexp.Regexp) func(string) bool {
	if include == nil && exclude == nil {
		return nil
	}
	return func(p string) bool {
		if include != nil && !include.MatchString(p) {
			return false
		}
		return exclude == nil || !exclude.MatchString(p)
	}
}

// JVMCgroup describes a JVM's cgroup as the JVM's container detection sees it: the quota
// discovery read, shares or weight from the settings cache, the ancestors' limits.
func (s *Source) JVMCgroup(cg cgroupid.Cgroup) jvm.CgroupCPU {
	l := s.Layout()
	var out jvm.CgroupCPU
	if l.CPU != nil {
		out.V2 = l.CPU.Version == 2
		// An error reading another setting (burst, cpuset) is the cpu collector's to report.
		if st, _ := s.Settings(cg, false); st.HasWeight && out.V2 {
			out.Weight = int64(st.Weight)
		} else if st.HasWeight {
			out.Shares = int64(st.Shares)
		}
		if cg.HasCPUMax && cg.CPUMax.Limited() {
			out.QuotaUS, out.PeriodUS = cg.CPUMax.QuotaUS, int64(cg.CPUMax.PeriodUS)
		}
	}
	if cg.HasMemoryLimit {
		out.MemoryLimitBytes = int64(cg.MemoryLimit)
	}
	// The ancestors' limits in the last complete walk (which keeps every limited cgroup
	// unless a path filter hides it).
	above := s.Latest().BindingAbove(cg.Path)
	if above.CPUCgroup != "" {
		out.AncestorQuotaUS, out.AncestorPeriodUS = above.CPU.QuotaUS, int64(above.CPU.PeriodUS)
	}
	if above.MemoryCgroup != "" {
		out.AncestorMemoryBytes = int64(above.MemoryBytes)
	}
	return out
}
