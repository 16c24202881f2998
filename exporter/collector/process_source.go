//go:build linux

package collector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/procfs"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/goruntime"
	"github.com/quota-exporter/quota_exporter/exporter/internal/jvm"
	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
	"github.com/quota-exporter/quota_exporter/exporter/internal/malloc"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procenv"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procstatus"
)

// pfKThread marks kernel threads in /proc/<pid>/stat flags: they have no exe, maps or
// runtime to inspect.
const pfKThread = 0x00200000

// perProcessTimeout bounds the reads of one process in one scrape.
const perProcessTimeout = 2 * time.Second

// processErrors is the collector label under which the process source counts the processes
// and cgroup.procs files it could not read, whatever collectors are enabled. It is the
// process collector's name, as before the source counted on its own.
const processErrors = "process"

// Runtime label values.
const (
	runtimeJVM   = "jvm"
	runtimeGo    = "go"
	runtimeOther = "other"
)

// process is one watched process in one scrape: what discovery read (stat and status, once
// per scrape) and the state kept across scrapes.
type process struct {
	PID     int
	Cgroup  cgroupfs.Cgroup
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
		names []string
		err   error
	}
	// jvmInfo is what JVM detection read in this listing, reused by the jvm collector in the
	// same scrape instead of reading perf data and task names again.
	jvmInfo *jvm.Info
	state   *processState
}

// threadNames reads task/*/comm at most once per scrape.
func (p *process) threadNames(ctx context.Context, procfs string) func() ([]string, error) {
	return func() ([]string, error) {
		p.threads.once.Do(func() { p.threads.names, p.threads.err = jvm.ThreadNames(ctx, procfs, p.PID) })
		return p.threads.names, p.threads.err
	}
}

// jvmProcess hands discovery's reads to the JVM reader.
func (p *process) jvmProcess(ctx context.Context, procfs string) jvm.Process {
	return jvm.Process{PID: p.PID, NSPid: p.Status.NSPid, UID: p.Status.UID, Affinity: p.Status.Affinity,
		Threads: p.Stat.NumThreads, StartTicks: p.Stat.Starttime, Comm: p.Stat.Comm, Exe: p.state.exe, StartTime: p.StartTime,
		ThreadNames: p.threadNames(ctx, procfs)}
}

// processKey identifies a process across scrapes: a PID reused by a new process is a new key.
type processKey struct {
	pid   int
	start uint64 // start time in clock ticks since boot
}

// processState is what is kept per process across scrapes: facts that do not change while
// it runs (runtime, name, executable) and each reader's typed results, refreshed on their
// own clocks. Guarded by mu; readers do their I/O outside it.
type processState struct {
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

	goInfo      *goruntime.Info // go collector: build info and GOMAXPROCS
	goAt        time.Time
	heap        heapLayout // malloc: the one owner of the heap layout; smaps reads it
	smaps       smapsReading
	jvmNoteDone bool // jvm collector: "perf data unavailable" logged once
}

// heapLayout is a glibc process's malloc state and arena limit, re-read at most every
// mallocRefresh by whoever needs it first (malloc collector or smaps refresher).
type heapLayout struct {
	state  *malloc.State
	limit  int
	at     time.Time
	failed bool
}

// smapsReading is the background smaps refresher's last reading of a process.
type smapsReading struct {
	bytes uint64
	at    time.Time // also set after a failed read (bytes 0): not retried before the interval
}

// ProcessSource finds the processes of the watched cgroups, shared by the process, go, jvm,
// malloc and smaps collectors. Processes are attributed to the cgroup whose cgroup.procs
// lists them in the CPU hierarchy (on v1 a process may sit at other paths in other
// controllers; the CPU path is the one its quota comes from). It owns every per-process
// cache: its own states and the JVM reader's, and forgets exited and exec'd processes in all
// of them after each listing, whichever collectors are enabled.
type ProcessSource struct {
	cfg     *Config // the Env's: tests adjust it after NewEnv
	cgroups *CgroupSource
	errors  *ErrorCounter
	fs      procfs.FS
	// JVM reads perf data and caches flags and layout per JVM.
	JVM *jvm.Inspector
	// detectors tell a process's runtime, in order (see newDetectors).
	detectors []detector
	// envKeys are the only environment variables read (the Go and malloc readers' keys).
	envKeys []string

	// maxAge is discoveryMaxAge: the collectors of one scrape share one listing.
	maxAge time.Duration

	bootOnce sync.Once
	bootTime float64 // seconds since the epoch, read once: start times are relative to it
	bootErr  error

	mu     sync.Mutex
	states map[processKey]*processState
	at     time.Time
	cached []*process
	errs   []error
}

// NewProcessSource prepares the process source over cfg.ProcPath.
func NewProcessSource(cfg *Config, cgroups *CgroupSource, errs *ErrorCounter) (*ProcessSource, error) {
	fs, err := procfs.NewFS(cfg.ProcPath)
	if err != nil {
		return nil, err
	}
	s := &ProcessSource{cfg: cfg, cgroups: cgroups, errors: errs, fs: fs, maxAge: discoveryMaxAge,
		JVM: &jvm.Inspector{Procfs: cfg.ProcPath}, states: map[processKey]*processState{}}
	s.detectors = newDetectors(s)
	s.envKeys = append(goruntime.EnvKeys(), malloc.EnvKeys()...)
	return s, nil
}

// envRefresh: the environment of a running process does not change (environ is the initial
// one); re-read it with the readers that use it, on their 30 s clock, in case of an exec.
const envRefresh = 30 * time.Second

// environ returns the named environment variables of p (s.envKeys only: environments hold
// secrets), read at most once per envRefresh and shared by the Go and malloc readers.
func (s *ProcessSource) environ(ctx context.Context, p *process) (map[string]string, error) {
	st := p.state
	st.envMu.Lock()
	defer st.envMu.Unlock()
	if !st.envAt.IsZero() && time.Since(st.envAt) < envRefresh {
		return st.env, st.envErr
	}
	st.env, st.envErr = procenv.Lookup(ctx, s.cfg.ProcPath, p.PID, s.envKeys...)
	st.envAt = time.Now()
	return st.env, st.envErr
}

// Len is the number of processes the source keeps state for (for tests: the leak).
func (s *ProcessSource) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.states)
}

// startTime is a process's start in seconds since the epoch; an error when the boot time
// (btime in <procfs>/stat) cannot be read.
func (s *ProcessSource) startTime(startTicks uint64) (float64, error) {
	s.bootOnce.Do(func() { s.bootTime, s.bootErr = kernel.BootTime(s.cfg.ProcPath) })
	if s.bootErr != nil {
		return 0, s.bootErr
	}
	return s.bootTime + float64(startTicks)/kernel.UserHZ, nil
}

// Processes returns the watched processes, listing them at most every discoveryMaxAge.
// Errors are per process (vanished, permission denied, ...), already counted; the list holds
// the rest.
func (s *ProcessSource) Processes(ctx context.Context) ([]*process, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cached != nil && time.Since(s.at) < s.maxAge {
		return s.cached, s.errs
	}
	procs, errs := s.list(ctx)
	for _, err := range errs {
		s.errors.Record(processErrors, "process listing", err)
	}
	if ctx.Err() == nil {
		s.cached, s.errs, s.at = procs, errs, time.Now()
	}
	return procs, errs
}

func (s *ProcessSource) list(ctx context.Context) ([]*process, []error) {
	l := s.cgroups.Layout()
	h := l.CPU
	if h == nil {
		h = l.Memory
	}
	if h == nil {
		return nil, nil
	}
	cgs, _ := s.cgroups.Cgroups(ctx)
	now := time.Now()
	var out []*process
	var errs []error
	cfg := *s.cfg
	for _, cg := range cgs {
		if !cg.HasProcs || (h == l.CPU && !cg.InCPU) || (h == l.Memory && !cg.InMemory) {
			continue
		}
		pids, err := cgroupfs.ReadProcs(h.Dir(cg.Path))
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("%s: %w", cg.Path, err))
			}
			continue
		}
		for _, pid := range pids {
			if ctx.Err() != nil {
				disambiguate(out) // incomplete: nothing is forgotten, but labels stay unique
				return out, errs
			}
			p, err := s.read(ctx, pid, cg)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if p == nil {
				continue
			}
			p.state.lastSeen = now
			if p.Runtime == runtimeOther && uint64(p.Stat.ResidentMemory()) < cfg.ProcessMinResident {
				continue
			}
			if cfg.ProcessInclude != nil && !cfg.ProcessInclude.MatchString(p.Name) ||
				cfg.ProcessExclude != nil && cfg.ProcessExclude.MatchString(p.Name) {
				continue
			}
			out = append(out, p)
		}
	}
	s.evict(now)
	disambiguate(out)
	return out, errs
}

// evict is the one eviction loop: processes not seen in this listing have exited; their
// state goes, here and in every runtime reader's cache.
func (s *ProcessSource) evict(now time.Time) {
	for k, st := range s.states {
		if st.lastSeen.Before(now) {
			delete(s.states, k)
		}
	}
	s.JVM.Evict(func(pid int, start uint64) bool {
		_, ok := s.states[processKey{pid, start}]
		return ok
	})
}

// read gets one process's stat and status (cheap files, read once per scrape) and, the first
// time it is seen, detects its runtime. Kernel threads return nil.
func (s *ProcessSource) read(ctx context.Context, pid int, cg cgroupfs.Cgroup) (*process, error) {
	ctx, cancel := context.WithTimeout(ctx, perProcessTimeout)
	defer cancel()
	proc, err := s.fs.Proc(pid)
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	stat, err := procread.Do(ctx, proc.Stat)
	if err != nil {
		return nil, fmt.Errorf("pid %d stat: %w", pid, err)
	}
	if stat.Flags&pfKThread != 0 {
		return nil, nil
	}
	b, err := procread.ReadFile(ctx, filepath.Join(s.cfg.ProcPath, strconv.Itoa(pid), "status"), procstatus.MaxSize)
	if err == nil && len(b) == 0 {
		err = os.ErrNotExist // exited between open and read
	}
	if err != nil {
		return nil, fmt.Errorf("pid %d status: %w", pid, kernel.Vanished(err))
	}
	key := processKey{pid, stat.Starttime}
	st, ok := s.states[key]
	if !ok || (st.detected && st.comm != stat.Comm) {
		if ok { // exec'd into another program: start afresh in every reader too
			s.JVM.Evict(func(p int, start uint64) bool { return p != pid || start != stat.Starttime })
		}
		st = &processState{}
		s.states[key] = st
	}
	p := &process{PID: pid, Cgroup: cg, Stat: stat, Status: procstatus.Parse(b, pid), state: st}
	p.StartTime, _ = s.startTime(stat.Starttime) // its error is reported by the process collector
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.detected {
		st.comm = stat.Comm
		if err := s.detect(ctx, p); err != nil && !errors.Is(err, os.ErrPermission) {
			return nil, err
		} else if err != nil {
			// Without ptrace access the runtime cannot be told: count the denial, export it as other.
			s.errors.Record(processErrors, fmt.Sprintf("pid %d", pid), err)
		}
		st.detected = true
	}
	p.Runtime = st.runtime
	if p.Runtime == "" {
		p.Runtime = runtimeOther
	}
	p.Name = st.name
	if p.Name == "" {
		p.Name = stat.Comm
	}
	return p, nil
}

// detect reads the exe link once per process and asks the detectors, in order.
func (s *ProcessSource) detect(ctx context.Context, p *process) error {
	exe, err := procread.Do(ctx, func() (string, error) {
		return os.Readlink(filepath.Join(s.cfg.ProcPath, strconv.Itoa(p.PID), "exe"))
	})
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
	p.state.runtime = runtimeOther
	return nil
}

// disambiguate makes the process label unique within a cgroup: two processes with the same
// name get their executable path appended, and if that is still ambiguous (worker processes
// of one binary), an ordinal by start time. Settings such as GOMAXPROCS are never summed.
func disambiguate(ps []*process) {
	group := func() map[string][]*process {
		g := map[string][]*process{}
		for _, p := range ps {
			k := p.Cgroup.Path + "\x00" + p.Runtime + "\x00" + p.Name
			g[k] = append(g[k], p)
		}
		return g
	}
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
