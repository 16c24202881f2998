//go:build linux

package cgroups

import (
	"context"
	"os"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// WalkOptions select what DiscoverAll returns.
type WalkOptions struct {
	Keep        func(path string) bool // path filter (include/exclude); nil keeps all
	BareRuntime string                 // runtime of bare 64-hex container dirs (see cgroupid.Locate)
	// Gate holds the cgroup directories whose files did not answer within ProbeBudget
	// (default DefaultProbeBudget): at most one outstanding read per directory, and a stuck
	// one is skipped (ErrStuck) until its read returns. nil: nothing is skipped.
	Gate        *procread.Gate
	ProbeBudget time.Duration
	// Cache, when set, keeps quotas and limits between walks (see ProbeCache). nil: every
	// walk reads them.
	Cache *ProbeCache
}

// DefaultProbeBudget bounds the reads of one directory's cgroup.procs, quota and limit;
// they take microseconds, so a directory that takes this long is stuck.
const DefaultProbeBudget = time.Second

// WalkError is a cgroup directory or file that could not be read during discovery.
type WalkError struct {
	Path string
	Err  error
}

// Discovery is one walk's result.
type Discovery struct {
	Cgroups []cgroupid.Cgroup
	Errs    []WalkError
	Skipped Skipped
}

// Skipped counts the cgroups a walk found and does not export, by reason.
type Skipped struct {
	// BelowContainer: cgroups below a container's that the runtime did not make (a tenant's
	// own, a nested runtime's); their processes are the container's. Example is one of them.
	BelowContainer int
	Example        string
	// RuntimeSubgroups: crun's "container" subgroup of a container's scope, whose
	// processes are the container's: expected, not a tenant's doing.
	RuntimeSubgroups int
	// Conmon: CRI-O's container monitors (crio-conmon-<id>), the runtime's, not the pod's.
	Conmon int
}

// DiscoverAll walks the cpu and memory hierarchies and returns, sorted by path, every cgroup
// that holds at least one process or has a CPU quota or memory limit, and every Kubernetes
// pod, container and sandbox cgroup whatever it holds: outside the host's PID namespace
// cgroup.procs hides processes (v1 leaves them out, v2 lists 0), and a BestEffort pod or a
// container of a pod-level limit has no limit of its own. On v1 a cgroup is keyed by its
// path, so the same path in the cpu and the memory hierarchy is one cgroup. Cgroups below a
// container are the container's (Locate): never returned, their processes are the container's;
// CRI-O's conmon cgroups are never returned. Unreadable directories are skipped and returned
// as errors; ctx ends the walk early.
func DiscoverAll(ctx context.Context, l *cgroupfs.Layout, opts WalkOptions) Discovery {
	// Walk the directories first, then read each one's cgroup.procs, quota and limit in
	// parallel: the reads are independent, and a serial walk was half the scrape's wall time.
	var dirs []dirProbe
	var errs []WalkError
	procsFrom := l.ProcessHierarchy()
	walk := func(h *cgroupfs.Hierarchy, cpu, memory bool) {
		if h == nil {
			return
		}
		errs = append(errs, walkKept(ctx, h, opts, func(dir, p string) {
			dirs = append(dirs, dirProbe{h: h, dir: dir, path: p, cpu: cpu, memory: memory, listPIDs: h == procsFrom})
		})...)
	}
	if l.CPU != nil && l.CPU == l.Memory { // v2: one tree
		walk(l.CPU, true, true)
	} else {
		walk(l.CPU, true, false)
		walk(l.Memory, false, true)
	}
	complete := ctx.Err() == nil // the walk before the reads
	n := opts.Cache.lookup(dirs)
	errs = append(errs, probeAll(ctx, opts, dirs)...)

	type state struct {
		inCPU, inMemory, procs bool
		pids                   []int
		cpuMax                 cgroupfs.CPUMax
		hasCPUMax              bool
		memLimit               uint64
		hasMemLimit            bool
		id                     cgroupid.Identity
		place                  cgroupid.Place
		exported               bool
		throttleSub            string
	}
	// crun with containerd (crun 1.8, seen on a real node) writes a container's limits only
	// to its "container" subgroup, and its scope has none: the subgroup's limit is the
	// container's when it is the tighter one. Whichever binds, a subgroup with a quota has
	// throttling counters of its own (ThrottleSubgroup).
	adopt := func(c, sub *state, subPath string) {
		if sub.hasCPUMax && sub.cpuMax.Limited() && (!c.hasCPUMax || !c.cpuMax.Limited() || sub.cpuMax.Cores() < c.cpuMax.Cores()) {
			c.cpuMax, c.hasCPUMax = sub.cpuMax, true
		}
		if sub.inCPU && sub.hasCPUMax && sub.cpuMax.Limited() {
			c.throttleSub = subPath
		}
		if sub.hasMemLimit && sub.memLimit > 0 && (!c.hasMemLimit || c.memLimit == 0 || sub.memLimit < c.memLimit) {
			c.memLimit, c.hasMemLimit = sub.memLimit, true
		}
	}
	found := map[string]*state{}
	for i := range dirs {
		d := &dirs[i]
		if d.procsErr != nil && !os.IsNotExist(d.procsErr) {
			errs = append(errs, WalkError{Path: d.path, Err: d.procsErr})
		}
		s := found[d.path]
		if s == nil {
			s = &state{}
			s.id, s.place = cgroupid.Locate(d.path, opts.BareRuntime)
			found[d.path] = s
		}
		s.inCPU = s.inCPU || d.cpu
		s.inMemory = s.inMemory || d.memory
		s.procs = s.procs || d.procs
		if d.listPIDs {
			s.pids = d.pids
		}
		if d.cpu {
			s.cpuMax, s.hasCPUMax = d.cpuMax, d.hasCPUMax
		}
		if d.memory {
			s.memLimit, s.hasMemLimit = d.memLimit, d.hasMemLimit
		}
	}
	// A container's own cgroups give it their processes (its counters already include them).
	var skipped Skipped
	for p, s := range found {
		switch s.place.Kind {
		case cgroupid.KindBelowContainer:
			if s.place.RuntimeSubgroup {
				skipped.RuntimeSubgroups++
			} else {
				skipped.BelowContainer++
				if skipped.Example == "" || p < skipped.Example {
					skipped.Example = p
				}
			}
			if c := found[s.place.Container]; c != nil && c.place.Kind != cgroupid.KindBelowContainer {
				c.procs = c.procs || s.procs
				c.pids = append(c.pids, s.pids[:min(len(s.pids), cgroupfs.MaxProcs-len(c.pids))]...)
				if s.place.RuntimeSubgroup {
					adopt(c, s, p)
				}
			}
		case cgroupid.KindConmon:
			skipped.Conmon++
		}
	}
	out := make([]cgroupid.Cgroup, 0, len(found))
	for p, s := range found {
		switch s.place.Kind {
		case cgroupid.KindBelowContainer, cgroupid.KindConmon:
		case cgroupid.KindPod, cgroupid.KindContainer, cgroupid.KindSandbox:
			s.exported = true
		default:
			s.exported = s.procs || (s.hasCPUMax && s.cpuMax.Limited()) || (s.hasMemLimit && s.memLimit > 0)
		}
		if !s.exported {
			continue
		}
		slices.Sort(s.pids)
		out = append(out, cgroupid.Cgroup{
			Path: p, Identity: s.id, Kind: s.place.Kind,
			HasProcs: s.procs, PIDs: s.pids, InCPU: s.inCPU, InMemory: s.inMemory,
			CPUMax: s.cpuMax, HasCPUMax: s.hasCPUMax, MemoryLimit: s.memLimit, HasMemoryLimit: s.hasMemLimit,
			ThrottleSubgroup: s.throttleSub,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	// Exported cgroups' limits are read again next walk: a resize shows within one scrape
	// (crun's subgroups too: their limits may be their container's).
	for i := range dirs {
		s := found[dirs[i].path]
		dirs[i].exported = s.exported || s.place.RuntimeSubgroup
	}
	opts.Cache.store(n, dirs, complete && ctx.Err() == nil)
	return Discovery{Cgroups: out, Errs: errs, Skipped: skipped}
}

// Paths lists the cgroup paths of the cpu and memory hierarchies (one walk when they are
// the same, v2) that opts.Keep keeps, root excluded, by getdents alone: what the cgroup
// source checks between walks to know whether any came or went. Sorted, without duplicates.
func Paths(ctx context.Context, l *cgroupfs.Layout, opts WalkOptions) ([]string, []WalkError) {
	seen := map[string]bool{}
	var errs []WalkError
	hs := []*cgroupfs.Hierarchy{l.CPU}
	if l.Memory != nil && (l.CPU == nil || l.Memory.MountPoint != l.CPU.MountPoint) {
		hs = append(hs, l.Memory)
	}
	for _, h := range hs {
		if h == nil {
			continue
		}
		errs = append(errs, walkKept(ctx, h, opts, func(_, p string) {
			if p != "/" {
				seen[p] = true
			}
		})...)
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, errs
}

// walkKept walks h's directories (walkDirs) until ctx ends and calls visit with each one
// whose cgroup path opts.Keep keeps; a filtered-out parent's children may still match, so the
// walk goes on below it. Unreadable directories come back as WalkErrors.
func walkKept(ctx context.Context, h *cgroupfs.Hierarchy, opts WalkOptions, visit func(dir, path string)) []WalkError {
	var errs []WalkError
	walkDirs(h.MountPoint, func(dir string) bool {
		if ctx.Err() != nil {
			return false
		}
		if p := h.Path(dir); opts.Keep == nil || opts.Keep(p) {
			visit(dir, p)
		}
		return true
	}, func(dir string, err error) {
		errs = append(errs, WalkError{Path: h.Path(dir), Err: err})
	})
	return errs
}

// dirProbe is one cgroup directory found by the walk and what reading it told.
type dirProbe struct {
	h           *cgroupfs.Hierarchy
	dir, path   string
	cpu, memory bool // which controllers' files to read here
	listPIDs    bool // list cgroup.procs whole (the process hierarchy), not just peek at it

	probed       bool // read returned (the fields below are what it found)
	limitsCached bool // quota and limit come from opts.Cache: read skips them
	exported     bool // the walk returned the cgroup: the cache reads its limits every walk

	procs       bool
	pids        []int
	procsErr    error
	cpuMax      cgroupfs.CPUMax
	hasCPUMax   bool
	memLimit    uint64
	hasMemLimit bool
}

func (d dirProbe) read() (dirProbe, error) {
	d.probed = true
	switch {
	case d.listPIDs:
		d.pids, d.procsErr = cgroupfs.ReadProcs(d.dir)
		d.procs = len(d.pids) > 0
		if d.procsErr != nil {
			d.pids = nil // a partial list (truncated, or a read error midway) is not listed
		}
	default:
		d.procs, d.procsErr = cgroupfs.HasProcs(d.dir)
	}
	// A cgroup with processes is exported: its limits must be current (a resize).
	d.limitsCached = d.limitsCached && !d.procs
	if d.cpu && !d.limitsCached {
		d.cpuMax, d.hasCPUMax = readCPUMax(d.h, d.dir)
	}
	if d.memory && !d.limitsCached {
		d.memLimit, d.hasMemLimit = readMemoryLimit(d.h, d.dir)
	}
	return d, nil
}

// probeAll reads the directories with one worker per CPU the exporter may use, each
// directory within a budget (procread.Map): a directory whose files block is given up,
// skipped through opts.Gate while stuck, and returned as an error; the others are read.
func probeAll(ctx context.Context, opts WalkOptions, dirs []dirProbe) []WalkError {
	budget := opts.ProbeBudget
	if budget <= 0 {
		budget = DefaultProbeBudget
	}
	b := procread.Budget{Workers: min(runtime.GOMAXPROCS(0), len(dirs)/64+1), Item: budget, Gate: opts.Gate, Kind: "cgroup directory",
		Pool: procread.CgroupFiles}
	res := procread.Map(ctx, b, dirs, func(d dirProbe) string { return d.dir }, dirProbe.read)
	var errs []WalkError
	for i, r := range res {
		if r.Err != nil {
			if r.Done { // not started because ctx ended: the walk is incomplete anyway
				errs = append(errs, WalkError{Path: dirs[i].path, Err: r.Err})
			}
			continue
		}
		dirs[i] = r.Value
	}
	return errs
}

// readCPUMax reads the quota of the hierarchy's version.
func readCPUMax(h *cgroupfs.Hierarchy, dir string) (cgroupfs.CPUMax, bool) {
	m, err := h.ReadCPUMax(dir)
	return m, err == nil
}

// readMemoryLimit reads memory.max (v2) or memory.limit_in_bytes (v1); 0 means unlimited.
func readMemoryLimit(h *cgroupfs.Hierarchy, dir string) (uint64, bool) {
	v, err := h.ReadMemoryLimit(dir)
	return v, err == nil
}
