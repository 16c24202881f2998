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
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// pfKThread marks kernel threads in /proc/<pid>/stat flags: they have no exe, maps or
// runtime to inspect.
const pfKThread = 0x00200000

// perProcessTimeout bounds the reads of one process in one scrape.
const perProcessTimeout = 2 * time.Second

// Runtime label values.
const (
	runtimeJVM   = "jvm"
	runtimeGo    = "go"
	runtimeOther = "other"
)

// process is one watched process in one scrape.
type process struct {
	PID     int
	Cgroup  cgroupfs.Cgroup
	Stat    procfs.ProcStat
	Status  procfs.ProcStatus
	Runtime string
	// Name is the process label: the comm, for JVMs the main class or jar; made unique
	// within the cgroup by Disambiguate.
	Name  string
	state *processState
}

// key identifies a process across scrapes: a PID reused by a new process is a new key.
type processKey struct {
	pid   int
	start uint64 // start time in clock ticks since boot
}

// processState is what the collectors cache per process: facts that do not change while it
// runs (runtime, build info, JVM flags) and results refreshed on a slower clock.
type processState struct {
	mu       sync.Mutex
	detected bool
	comm     string // at detection: an exec keeps pid and start time but changes the program
	runtime  string
	name     string   // for JVMs: main class / jar; else ""
	exe      string   // executable path, the disambiguator of last resort
	data     sync.Map // collector-owned entries (go build info, JVM layout, heap layout, smaps)
	lastSeen time.Time
}

// ProcessSource finds the processes of the watched cgroups, shared by the process, go, jvm,
// malloc and smaps collectors. Processes are attributed to the cgroup whose cgroup.procs
// lists them in the CPU hierarchy (on v1 a process may sit at other paths in other
// controllers; the CPU path is the one its quota comes from).
type ProcessSource struct {
	env *Env
	fs  procfs.FS

	bootOnce sync.Once
	bootTime float64 // seconds since the epoch, read once: start times are relative to it
	bootErr  error

	mu     sync.Mutex
	states map[processKey]*processState
	at     time.Time
	cached []*process
	errs   []error
	// detect fills in the runtime and name of a new process; set by NewProcessSource.
	detect func(ctx context.Context, p *process) error
}

func newProcessSource(env *Env) (*ProcessSource, error) {
	fs, err := procfs.NewFS(env.Config.ProcPath)
	if err != nil {
		return nil, err
	}
	s := &ProcessSource{env: env, fs: fs, states: map[processKey]*processState{}}
	s.detect = s.detectRuntime
	return s, nil
}

// startTime is the process's start in seconds since the epoch; false when the boot time
// (btime in <procfs>/stat) cannot be read.
func (s *ProcessSource) startTime(p *process) (float64, error) {
	s.bootOnce.Do(func() {
		st, err := s.fs.Stat()
		if err != nil {
			s.bootErr = fmt.Errorf("boot time from %s/stat: %w", s.env.Config.ProcPath, err)
			return
		}
		s.bootTime = float64(st.BootTime)
	})
	return s.bootTime + float64(p.Stat.Starttime)/userHZ, s.bootErr
}

// processSources are shared per Env: every process collector of one exporter uses one.
var processSources sync.Map // *Env -> *ProcessSource

func processSourceFor(env *Env) (*ProcessSource, error) {
	if s, ok := processSources.Load(env); ok {
		return s.(*ProcessSource), nil
	}
	s, err := newProcessSource(env)
	if err != nil {
		return nil, err
	}
	actual, _ := processSources.LoadOrStore(env, s)
	return actual.(*ProcessSource), nil
}

// Processes returns the watched processes, listing them at most every discoveryMaxAge.
// Errors are per process (vanished, permission denied, ...); the list holds the rest.
func (s *ProcessSource) Processes(ctx context.Context) ([]*process, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cached != nil && time.Since(s.at) < s.env.Cgroups.maxAge {
		return s.cached, s.errs
	}
	procs, errs := s.list(ctx)
	if ctx.Err() == nil {
		s.cached, s.errs, s.at = procs, errs, time.Now()
	}
	return procs, errs
}

func (s *ProcessSource) list(ctx context.Context) ([]*process, []error) {
	l := s.env.Cgroups.Layout()
	h := l.CPU
	if h == nil {
		h = l.Memory
	}
	cgs, _ := s.env.Cgroups.Cgroups(ctx)
	now := time.Now()
	var out []*process
	var errs []error
	cfg := s.env.Config
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
	for k, st := range s.states { // forget processes that exited
		if st.lastSeen.Before(now) {
			delete(s.states, k)
		}
	}
	disambiguate(out)
	return out, errs
}

// read gets one process's stat and status (cheap files) and, the first time it is seen,
// detects its runtime. Kernel threads return nil.
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
	status, err := procread.Do(ctx, proc.NewStatus)
	if err != nil {
		return nil, fmt.Errorf("pid %d status: %w", pid, err)
	}
	key := processKey{pid, stat.Starttime}
	st, ok := s.states[key]
	if !ok || (st.detected && st.comm != stat.Comm) {
		st = &processState{} // new, or exec'd into another program: start afresh
		s.states[key] = st
	}
	p := &process{PID: pid, Cgroup: cg, Stat: stat, Status: status, state: st}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.detected {
		st.comm = stat.Comm
		if err := s.detect(ctx, p); err != nil && !errors.Is(err, os.ErrPermission) {
			return nil, err
		} else if err != nil {
			// Without ptrace access the runtime cannot be told: count the denial, export it as other.
			s.env.Errors.Record("process", fmt.Sprintf("pid %d", pid), err)
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

// detectRuntime is replaced by the runtime detectors registered below.
func (s *ProcessSource) detectRuntime(ctx context.Context, p *process) error {
	exe, err := os.Readlink(filepath.Join(s.env.Config.ProcPath, strconv.Itoa(p.PID), "exe"))
	if err == nil {
		p.state.exe = exe
	}
	for _, d := range runtimeDetectors {
		rt, name, err := d(ctx, s.env, p)
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

// runtimeDetectors tell a process's runtime (and, for JVMs, its name): the jvm and go
// collectors' files register theirs. "" means not this runtime.
var runtimeDetectors []func(ctx context.Context, env *Env, p *process) (runtime, name string, err error)

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
