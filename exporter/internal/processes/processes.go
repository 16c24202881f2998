//go:build linux

package processes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
	"github.com/quota-exporter/quota_exporter/exporter/internal/execache"
	"github.com/quota-exporter/quota_exporter/exporter/internal/goruntime"
	"github.com/quota-exporter/quota_exporter/exporter/internal/jvm"
	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
	"github.com/quota-exporter/quota_exporter/exporter/internal/malloc"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procenv"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procstatus"
	"github.com/quota-exporter/quota_exporter/exporter/internal/readerr"
	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// pfKThread marks kernel threads in /proc/<pid>/stat flags: they have no exe, maps or
// runtime to inspect.
const pfKThread = 0x00200000

// perProcessTimeout bounds the reads of one process in one scrape.
const perProcessTimeout = 2 * time.Second

// ProcessErrors is the collector label under which the process source counts the processes
// it could not read, whatever collectors are enabled (cgroup.procs is read, and counted, by
// the discovery walk). It is the
// process collector's name, as before the source counted on its own.
const ProcessErrors = "process"

// Runtime label values.
const (
	RuntimeJVM   = "jvm"
	RuntimeGo    = "go"
	RuntimeOther = "other"
	// RuntimeUnknown is a process whose runtime detection has not returned (a read blocked
	// in the kernel, e.g. behind the process's mmap_lock): its stat and status series are
	// exported meanwhile, and it is detected again once the read returns.
	RuntimeUnknown = "unknown"
)

// process is one watched process in one scrape: what discovery read (stat and status, once
// per scrape) and the state kept across scrapes.
type Process struct {
	PID     int
	Cgroup  cgroupid.Cgroup
	Stat    procfs.ProcStat
	Status  procstatus.Status
	Runtime string
	// Name is the process label: the comm, for JVMs the main class or jar; made unique
	// within the cgroup by disambiguate.
	Name string
	// StartTime is the start in seconds since the epoch; 0 when the boot time is unknown.
	StartTime float64
	// threads memoises the thread names for this scrape: the JVM and malloc readers both
	// need them.
	threads struct {
		once  sync.Once
		read  bool // names and err are set
		names []string
		err   error
	}
	// jvmInfo is what JVM detection read in this listing, reused by the jvm collector in the
	// same scrape instead of reading perf data and task names again.
	jvmInfo *jvm.Info
	state   *state
}

// DetectedJVM is what JVM detection read about p in this listing (nil when it did not run in
// this listing): the jvm collector reuses it instead of reading perf data again.
func (p *Process) DetectedJVM() *jvm.Info { return p.jvmInfo }

// DetectedGo is the build info Go detection read, and when (nil before detection or for
// other runtimes): the go collector serves it until it is due a re-read.
func (p *Process) DetectedGo() (*goruntime.Info, time.Time) {
	p.state.mu.Lock()
	defer p.state.mu.Unlock()
	return p.state.goInfo, p.state.goAt
}

// Key is p's identity across listings.
func (p *Process) Key() Key { return Key{p.PID, p.Stat.Starttime} }

// ThreadNames reads task/*/comm at most once per scrape.
func (p *Process) ThreadNames(ctx context.Context, procfs string) func() ([]string, error) {
	return func() ([]string, error) {
		p.threads.once.Do(func() {
			p.threads.names, p.threads.err = jvm.ThreadNames(ctx, procfs, p.PID)
			p.threads.read = true
		})
		return p.threads.names, p.threads.err
	}
}

// JVMProcess hands discovery's reads to the JVM reader.
func (p *Process) JVMProcess(ctx context.Context, procfs string) jvm.Process {
	return jvm.Process{PID: p.PID, NSPid: p.Status.NSPid, UID: p.Status.UID, Affinity: p.Status.Affinity,
		Threads: p.Stat.NumThreads, StartTicks: p.Stat.Starttime, Comm: p.Stat.Comm, Exe: p.state.exe, StartTime: p.StartTime,
		ThreadNames: p.ThreadNames(ctx, procfs)}
}

// Key identifies a process across scrapes: a PID reused by a new process is a new key.
type Key struct {
	PID   int
	Start uint64 // start time in clock ticks since boot
}

// state is what is kept per process across scrapes: facts that do not change while
// it runs (runtime, name, executable), what detection read, and each reader's slot
// (Slot), refreshed on the reader's own clock. Guarded by mu; readers do their I/O outside it.
type state struct {
	mu       sync.Mutex
	detected bool
	comm     string // at detection: an exec keeps pid and start time but changes the program
	runtime  string
	name     string // for JVMs: main class / jar; else ""
	exe      string // executable path, the disambiguator of last resort
	lastSeen time.Time

	envMu  sync.Mutex // separate from mu: detection (under mu) reads it too
	env    map[string]string
	envErr error
	envAt  time.Time

	goInfo *goruntime.Info // Go detection's build info (DetectedGo)
	goAt   time.Time
	slots  []any // by Slot index; nil until a reader stores
}

// Source finds the processes of the watched cgroups, shared by the process, go, jvm,
// malloc and smaps collectors. Processes are attributed to the cgroup whose cgroup.procs
// lists them in the CPU hierarchy (on v1 a process may sit at other paths in other
// controllers; the CPU path is the one its quota comes from). It owns every per-process
// cache: its own states and the JVM reader's, and forgets exited and exec'd processes in all
// of them after each listing, whichever collectors are enabled.
type Source struct {
	// Filter leaves processes out of the listing; set before the first listing.
	Filter Filter
	// Budgets, if set, bounds the processes inspected per tenant and node-wide
	// (budget.Processes); set before the first listing.
	Budgets  *budget.Book
	procPath string
	cgroups  *cgroups.Source
	// readErrors are the processes the listing could not read, until ReadErrors takes them.
	readErrors readerr.Log
	fs         procfs.FS
	// JVM reads perf data and caches flags and layout per JVM.
	JVM *jvm.Inspector
	// GoBuilds and Allocators keep what is derived from each executable file (its Go build
	// info, the allocator its dynamic symbols tell), shared by the processes of one binary
	// and kept by the file's identity (execache), at most maxExecutables of each.
	GoBuilds   *execache.Cache[goruntime.Build]
	Allocators *execache.Cache[string]
	// detectors tell a process's runtime, in order (see newDetectors).
	detectors []detector
	// envKeys are the only environment variables read (the Go and malloc readers' keys).
	envKeys []string

	// MaxAge is DiscoveryMaxAge: the collectors of one scrape share one listing.
	MaxAge time.Duration

	bootOnce sync.Once
	bootTime float64 // seconds since the epoch, read once: start times are relative to it
	bootErr  error

	// gate keys per-process reads by pid (and start time) and kind: a process stuck in
	// the kernel costs one blocked read per kind and is skipped until it returns.
	gate *procread.Gate
	// last is the last complete listing, for background loops (Last).
	last atomic.Pointer[[]*Process]

	mu     sync.Mutex
	states map[Key]*state
	at     time.Time
	cached []*Process
	errs   []error

	// evictHooks hold per-process resources outside the states (the gopause collector's
	// uprobes): each is told, under mu, which processes are gone (keep false).
	evictHooks []func(keep func(pid int, start uint64) bool)
}

// Filter is which processes the listing keeps (see --process.* flags).
type Filter struct {
	// MinResident leaves out processes of no known runtime with less resident memory.
	MinResident      uint64
	Include, Exclude *regexp.Regexp // on the process label
}

// New prepares the process source over procPath (the host's /proc). gate
// skips its stuck per-process reads (nil: a gate of its own).
func New(procPath string, cgs *cgroups.Source, gate *procread.Gate, filter Filter) (*Source, error) {
	fs, err := procfs.NewFS(procPath)
	if err != nil {
		return nil, err
	}
	if gate == nil {
		gate = procread.NewGate(ProcessErrors)
	}
	s := &Source{Filter: filter, procPath: procPath, cgroups: cgs, fs: fs, MaxAge: cgroups.DiscoveryMaxAge,
		JVM: &jvm.Inspector{Procfs: procPath}, gate: gate, states: map[Key]*state{},
		GoBuilds: execache.New[goruntime.Build](maxExecutables), Allocators: execache.New[string](maxExecutables)}
	s.detectors = newDetectors(s)
	s.envKeys = append(goruntime.EnvKeys(), malloc.EnvKeys()...)
	return s, nil
}

// maxExecutables caps the executable files whose derived facts are kept (a few hundred bytes
// each: capped strings); beyond it the least recently used goes.
const maxExecutables = 1024

// envRefresh: the environment of a running process does not change (environ is the initial
// one); re-read it with the readers that use it, on their 30 s clock, in case of an exec.
const envRefresh = 30 * time.Second

// Environ returns the named environment variables of p (s.envKeys only: environments hold
// secrets), read at most once per envRefresh and shared by the Go and malloc readers.
func (s *Source) Environ(ctx context.Context, p *Process) (map[string]string, error) {
	st := p.state
	st.envMu.Lock()
	defer st.envMu.Unlock()
	if !st.envAt.IsZero() && time.Since(st.envAt) < envRefresh {
		return st.env, st.envErr
	}
	st.env, st.envErr = procenv.Lookup(ctx, s.procPath, p.PID, s.envKeys...)
	st.envAt = time.Now()
	return st.env, st.envErr
}

// Len is the number of processes the source keeps state for (for tests: the leak).
func (s *Source) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.states)
}

// StartTime is a process's start in seconds since the epoch; an error when the boot time
// (btime in <procfs>/stat) cannot be read.
func (s *Source) StartTime(startTicks uint64) (float64, error) {
	s.bootOnce.Do(func() { s.bootTime, s.bootErr = kernel.BootTime(s.procPath) })
	if s.bootErr != nil {
		return 0, s.bootErr
	}
	return s.bootTime + float64(startTicks)/kernel.UserHZ, nil
}

// ReadErrors takes the processes the listing could not read since the last call, by reason:
// the exporter counts them under collector ProcessErrors, whatever collectors are enabled.
func (s *Source) ReadErrors() []readerr.Batch { return s.readErrors.Take() }

// Processes returns the watched processes, listing them at most every DiscoveryMaxAge.
// Errors are per process (vanished, permission denied, ...), already counted; the list holds
// the rest. A process whose reads are stuck (procread.ErrStuck) is left out without an
// error: its timeout was counted once, when its read did not return.
func (s *Source) Processes(ctx context.Context) ([]*Process, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cached != nil && time.Since(s.at) < s.MaxAge {
		return s.cached, s.errs
	}
	procs, errs := s.list(ctx)
	for _, err := range errs {
		s.readErrors.Add("process listing", err)
	}
	if ctx.Err() == nil {
		s.cached, s.errs, s.at = procs, errs, time.Now()
		s.last.Store(&procs)
	}
	return procs, errs
}

// Expire makes the next Processes call list again, whatever MaxAge.
func (s *Source) Expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = time.Time{}
}

// Last is the last complete listing the scrapes made, without reading or waiting for the
// source's lock: background loops use it instead of listing on their own. Processes in it
// may have exited since.
func (s *Source) Last() []*Process {
	if p := s.last.Load(); p != nil {
		return *p
	}
	return nil
}

// processWorkers bounds the per-process reads run at once: up to this many stuck processes
// cost one perProcessTimeout together, and nothing once they are stuck.
const processWorkers = 16

// gatedContext is the context of a read run under the gate: no deadline of its own, so a read
// that blocks keeps its key (and its one OS thread) until the kernel returns, instead of
// being given up by an inner timeout and started again by the next scrape. The reads inside
// count against tenant's budget of stuck reads, whose slot the gated read holds.
func gatedContext(tenant string) (context.Context, context.CancelFunc) {
	return context.WithTimeout(procread.WithPool(context.Background(), procread.ProcessFiles, tenant), 24*time.Hour)
}

// Each runs read for every process, processWorkers at once, each within
// perProcessTimeout, through the source's gate keyed by process and kind: a process whose
// read of that kind did not return is skipped with procread.ErrStuck until it does. The
// reads count against procread.ProcessFiles by the process's tenant: a tenant whose stuck
// reads fill its budget has its reads refused (procread.ErrTenantOverloaded) until they return.
// Reads go by PID: after each, the process's start time is read again, and a reading of a
// PID that another process took meanwhile is dropped (kernel.ErrPIDReused).
// read must not write to memory the caller reads after it returns except under p.state.mu:
// a stuck read may still finish later.
func Each[R any](ctx context.Context, s *Source, procs []*Process, kind string,
	read func(ctx context.Context, p *Process) (R, error)) []procread.Result[R] {
	return EachWithin(ctx, s, procs, kind, itemBudget(ctx), read)
}

// EachWithin is Each with each process's read given up after within: for background reads,
// which no scrape waits for.
func EachWithin[R any](ctx context.Context, s *Source, procs []*Process, kind string, within time.Duration,
	read func(ctx context.Context, p *Process) (R, error)) []procread.Result[R] {
	b := procread.Budget{Workers: processWorkers, Item: within, Gate: s.gate, Kind: kind,
		Pool: procread.ProcessFiles, Tenant: func(i int) string { return budget.TenantOf(procs[i].Cgroup) }}
	return procread.Map(ctx, b, procs, func(p *Process) string { return p.gateKey(kind) }, func(p *Process) (R, error) {
		rctx, cancel := gatedContext(budget.TenantOf(p.Cgroup))
		defer cancel()
		v, err := read(rctx, p)
		if err == nil {
			if err = s.samePID(p); err != nil {
				var zero R
				return zero, err
			}
		}
		return v, err
	})
}

// samePID checks that p's PID still belongs to p (its start time), after a read by PID.
func (s *Source) samePID(p *Process) error {
	start, err := kernel.StartTicks(s.procPath, p.PID)
	if err != nil {
		return fmt.Errorf("pid %d: %w", p.PID, err)
	}
	if start != p.Stat.Starttime {
		return fmt.Errorf("pid %d: %w", p.PID, kernel.ErrPIDReused)
	}
	return nil
}

// itemBudget is the time one process's reads of one kind may take: perProcessTimeout, but
// at most a quarter of what is left of the scrape, since a scrape runs up to three rounds of
// per-process reads one after another (stat and status, detection, the runtime readers) and
// the healthy processes must still be exported when some are stuck.
func itemBudget(ctx context.Context) time.Duration {
	d := perProcessTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, max(time.Until(dl)/4, 10*time.Millisecond))
	}
	return d
}

// WithRuntime keeps the processes of one runtime.
func WithRuntime(procs []*Process, runtime string) []*Process {
	var out []*Process
	for _, p := range procs {
		if p.Runtime == runtime {
			out = append(out, p)
		}
	}
	return out
}

// gateKey names one kind of read of one process (pid and start time) in the source's gate.
func (p *Process) gateKey(kind string) string {
	return fmt.Sprintf("%d:%d/%s", p.PID, p.Stat.Starttime, kind)
}

// procItem is one pid listed by one cgroup's cgroup.procs, by the time listedBy (the
// walk's ListedBy).
type procItem struct {
	pid      int
	cg       cgroupid.Cgroup
	listedBy uint64
}

// discovered is what one process's discovery reads returned; nil for a kernel thread.
type discovered struct {
	stat   procfs.ProcStat
	status []byte
}

func (s *Source) list(ctx context.Context) ([]*Process, []error) {
	if s.cgroups.Layout().ProcessHierarchy() == nil {
		return nil, nil
	}
	// The walk listed each cgroup's processes (cgroup.procs of the process hierarchy) and
	// counted the cgroups it could not list, as discovery errors.
	snap := s.cgroups.Snapshot(ctx)
	now := time.Now()
	var errs []error
	var items []procItem
	for _, cg := range snap.Cgroups {
		for _, pid := range cg.PIDs {
			items = append(items, procItem{pid, cg, snap.ListedBy})
		}
	}
	items = s.withinBudget(items)
	// stat and status of every process in parallel, skipped per pid while stuck.
	b := procread.Budget{Workers: processWorkers, Item: itemBudget(ctx), Gate: s.gate, Kind: "stat",
		Pool: procread.ProcessFiles, Tenant: func(i int) string { return budget.TenantOf(items[i].cg) }}
	res := procread.Map(ctx, b, items, func(it procItem) string { return strconv.Itoa(it.pid) + "/stat" }, s.readStat)
	complete := ctx.Err() == nil
	var found, undetected []*Process
	for i, r := range res {
		if !r.Done && r.Err != nil && !errors.Is(r.Err, procread.ErrStuck) {
			complete = false // the scrape ended first
			continue
		}
		if r.Err != nil {
			if err := CountOnce(r.Err); err != nil {
				errs = append(errs, fmt.Errorf("pid %d: %w", items[i].pid, err))
			}
			continue
		}
		if r.Value == nil {
			continue // kernel thread
		}
		p := s.process(items[i], r.Value)
		p.state.lastSeen = now
		found = append(found, p)
		if !p.state.detected {
			undetected = append(undetected, p)
		}
	}
	// Runtime detection of new processes, in parallel, skipped per process while stuck: a detection
	// that timed out is not retried while its read is outstanding.
	dres := Each(ctx, s, undetected, "detect", s.detectAlone)
	failed, undecided := map[*Process]bool{}, map[*Process]bool{}
	for i, r := range dres {
		p := undetected[i]
		switch {
		case r.Err == nil:
			r.Value.apply(p)
		case errors.Is(r.Err, os.ErrPermission):
			// Without ptrace access the runtime cannot be told: count the denial, export it as other.
			s.readErrors.Add(fmt.Sprintf("pid %d", p.PID), r.Err)
			r.Value.apply(p)
		default:
			if !r.Done && !errors.Is(r.Err, procread.ErrStuck) {
				complete = false
			} else if err := CountOnce(r.Err); err != nil {
				errs = append(errs, fmt.Errorf("pid %d: %w", p.PID, err))
			}
			if r.Done && errors.Is(r.Err, procread.ErrTimeout) { // ErrStuck too
				undecided[p] = true
			} else {
				failed[p] = true
			}
		}
	}
	filter := s.Filter
	var out []*Process
	for _, p := range found {
		if failed[p] {
			continue
		}
		p.Runtime, p.Name = p.state.runtime, p.state.name
		switch {
		case undecided[p]:
			p.Runtime = RuntimeUnknown
		case p.Runtime == "":
			p.Runtime = RuntimeOther
		}
		if p.Name == "" {
			p.Name = p.Stat.Comm
		}
		if (p.Runtime == RuntimeOther || p.Runtime == RuntimeUnknown) && uint64(p.Stat.ResidentMemory()) < filter.MinResident {
			continue
		}
		if filter.Include != nil && !filter.Include.MatchString(p.Name) ||
			filter.Exclude != nil && filter.Exclude.MatchString(p.Name) {
			continue
		}
		out = append(out, p)
	}
	if complete {
		s.evict(now) // incomplete: nothing is forgotten
	}
	disambiguate(out)
	return out, errs
}

// withinBudget keeps the processes the process budget allows, in the walk's order (by cgroup
// path, then as cgroup.procs lists them), and records the tenants it cut: the others are not
// read at all.
func (s *Source) withinBudget(items []procItem) []procItem {
	if s.Budgets == nil {
		return items
	}
	u := budget.Units{N: len(items), Tenant: func(i int) string { return budget.TenantOf(items[i].cg) },
		Name: func(i int) string { return budget.TenantName(items[i].cg) }}
	keep, skips := budget.Allot(u, s.Budgets.Limits().Processes, budget.Processes)
	items = budget.Keep(items, keep)
	s.Budgets.Pass(budget.Processes, len(items), skips)
	return items
}

// evict is the one eviction loop: processes not seen in this listing have exited; their
// state goes, here and in every runtime reader's cache.
func (s *Source) evict(now time.Time) {
	for k, st := range s.states {
		if st.lastSeen.Before(now) {
			delete(s.states, k)
		}
	}
	keep := func(pid int, start uint64) bool {
		_, ok := s.states[Key{PID: pid, Start: start}]
		return ok
	}
	s.JVM.Evict(keep)
	for _, h := range s.evictHooks {
		h(keep)
	}
}

// OnEvict registers f to be told, after each listing and on an exec, which processes are
// gone: keep(pid, start) is false for them. f runs under the source's lock: it must not
// call back into the source.
func (s *Source) OnEvict(f func(keep func(pid int, start uint64) bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evictHooks = append(s.evictHooks, f)
}

// readStat reads one process's stat and status (cheap files, read once per scrape). It
// touches no shared state: it may finish after the scrape gave up on it. Kernel threads and
// zombies return nil.
func (s *Source) readStat(it procItem) (*discovered, error) {
	proc, err := s.fs.Proc(it.pid)
	if err != nil {
		return nil, err
	}
	stat, err := proc.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat: %w", kernel.Vanished(err))
	}
	// A zombie (exited, not yet reaped by its parent) has no memory, threads or exe left: like
	// a kernel thread it is not a workload. The walk's PIDs may be up to its cache age old.
	if stat.Flags&pfKThread != 0 || stat.State == "Z" || stat.State == "X" {
		return nil, nil
	}
	// Started after the walk listed its PID: the listed process exited and another, maybe
	// of another cgroup, took the PID. It is not this cgroup's (the next walk places it).
	if it.listedBy != 0 && uint64(stat.Starttime) > it.listedBy {
		return nil, nil
	}
	ctx, cancel := gatedContext(budget.TenantOf(it.cg))
	defer cancel()
	b, err := procread.ReadFile(ctx, filepath.Join(s.procPath, strconv.Itoa(it.pid), "status"), procstatus.MaxSize)
	if err == nil && len(b) == 0 {
		err = os.ErrNotExist // exited between open and read
	}
	if err != nil {
		return nil, fmt.Errorf("status: %w", kernel.Vanished(err))
	}
	return &discovered{stat: stat, status: b}, nil
}

// process is the listing's entry for what readStat found, with the state kept across
// scrapes (new for a new or exec'd process). Called under s.mu.
func (s *Source) process(it procItem, d *discovered) *Process {
	key := Key{it.pid, d.stat.Starttime}
	st, ok := s.states[key]
	if !ok || (st.detected && st.comm != d.stat.Comm) {
		if ok { // exec'd into another program: start afresh in every reader too
			keep := func(p int, start uint64) bool { return p != it.pid || start != d.stat.Starttime }
			s.JVM.Evict(keep)
			for _, h := range s.evictHooks {
				h(keep)
			}
		}
		st = &state{comm: d.stat.Comm}
		s.states[key] = st
	}
	p := &Process{PID: it.pid, Cgroup: it.cg, Stat: d.stat, Status: procstatus.Parse(d.status, it.pid), state: st}
	p.StartTime, _ = s.StartTime(d.stat.Starttime) // its error is reported by the process collector
	return p
}

// detection is what detectAlone found about a process, applied to its state by the listing.
type detection struct {
	scratch *state
	jvmInfo *jvm.Info
	// threads are the thread names detection read, if it did: the readers of the same
	// scrape reuse them.
	threadsRead bool
	threads     []string
	threadsErr  error
}

// apply copies a detection into p's state and marks it detected.
func (d detection) apply(p *Process) {
	st := p.state
	st.mu.Lock()
	if d.scratch != nil {
		st.runtime, st.name, st.exe = d.scratch.runtime, d.scratch.name, d.scratch.exe
		st.goInfo, st.goAt = d.scratch.goInfo, d.scratch.goAt
	}
	st.detected = true
	st.mu.Unlock()
	if d.scratch != nil && !d.scratch.envAt.IsZero() {
		st.envMu.Lock()
		st.env, st.envErr, st.envAt = d.scratch.env, d.scratch.envErr, d.scratch.envAt
		st.envMu.Unlock()
	}
	p.jvmInfo = d.jvmInfo
	if d.threadsRead {
		p.threads.once.Do(func() { p.threads.names, p.threads.err, p.threads.read = d.threads, d.threadsErr, true })
	}
}

// detectAlone runs detection on a copy of p with a scratch state, so a detection given up on
// by the scrape writes nothing shared when it finally returns.
func (s *Source) detectAlone(ctx context.Context, p *Process) (detection, error) {
	q := &Process{PID: p.PID, Cgroup: p.Cgroup, Stat: p.Stat, Status: p.Status, StartTime: p.StartTime, state: &state{}}
	err := s.detect(ctx, q)
	return detection{scratch: q.state, jvmInfo: q.jvmInfo,
		threadsRead: q.threads.read, threads: q.threads.names, threadsErr: q.threads.err}, err
}

// detect reads the exe link once per process and asks the detectors, in order.
func (s *Source) detect(ctx context.Context, p *Process) error {
	exe, err := os.Readlink(filepath.Join(s.procPath, strconv.Itoa(p.PID), "exe"))
	if err == nil {
		p.state.exe = exe
	}
	for _, d := range s.detectors {
		rt, name, err := d.detect(ctx, p)
		if err != nil {
			return err
		}
		if rt != "" {
			p.state.runtime, p.state.name = rt, name
			return nil
		}
	}
	p.state.runtime = RuntimeOther
	return nil
}

// disambiguate makes the process label unique within a cgroup: two processes with the same
// name (as a label value: cleaned) get their executable path appended, and if that is still
// ambiguous (worker processes of one binary), an ordinal by start time. Settings such as
// GOMAXPROCS are never summed. Last, the names become label values unique within their
// cgroup and runtime (tenantstr.Unique), whatever bytes a tenant put in them.
func disambiguate(ps []*Process) {
	group := func() map[string][]*Process {
		g := map[string][]*Process{}
		for _, p := range ps {
			k := p.Cgroup.Path + "\x00" + p.Runtime + "\x00" + tenantstr.Label(p.Name)
			g[k] = append(g[k], p)
		}
		return g
	}
	defer func() {
		byCgroup := map[string][]*Process{}
		for _, p := range ps {
			k := p.Cgroup.Path + "\x00" + p.Runtime
			byCgroup[k] = append(byCgroup[k], p)
		}
		for _, same := range byCgroup {
			names := make([]string, len(same))
			for i, p := range same {
				names[i] = p.Name
			}
			for i, l := range tenantstr.Unique(names) {
				same[i].Name = l
			}
		}
	}()
	for _, same := range group() {
		if len(same) < 2 {
			continue
		}
		for _, p := range same {
			if p.state.exe != "" && p.state.exe != p.Name {
				p.Name = p.Name + " (" + p.state.exe + ")"
			}
		}
	}
	for _, same := range group() {
		if len(same) < 2 {
			continue
		}
		sort.Slice(same, func(i, j int) bool {
			if same[i].Stat.Starttime != same[j].Stat.Starttime {
				return same[i].Stat.Starttime < same[j].Stat.Starttime
			}
			return same[i].PID < same[j].PID
		})
		for i, p := range same[1:] {
			p.Name = fmt.Sprintf("%s #%d", p.Name, i+2)
		}
	}
}

// CountOnce is the error a per-process read returned, or nil when it must not be counted
// again: the process is stuck (its timeout was counted when it got stuck).
func CountOnce(err error) error {
	if errors.Is(err, procread.ErrStuck) {
		return nil
	}
	return err
}
