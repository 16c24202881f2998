//go:build linux

package cgroupfs

import "context"

// QuotaRecheckEvery is how many walks a known directory's quota is trusted before it is read
// again: quotas change only when a container is resized, so with the sampler's walk every
// 10 s a resize is seen within about a minute.
const QuotaRecheckEvery = 6

// QuotaCache makes DiscoverQuotas incremental: it remembers every cpu hierarchy directory
// and its quota between walks, and reads the quota only of directories new to this walk or
// to the previous one (a runtime creates the directory before it writes the quota), and of
// the others every QuotaRecheckEvery walks. Re-reading 1 000 unchanged quota files every
// 10 s was most of the idle sampler's cost after its own reads. Not safe for concurrent use.
type QuotaCache struct {
	walks uint64
	dirs  map[string]*quotaEntry
}

type quotaEntry struct {
	firstWalk, readWalk, seenWalk uint64
	max                           CPUMax
	has                           bool
}

// due reports whether the quota must be read in walk n.
func (e *quotaEntry) due(n uint64) bool {
	return e.readWalk == 0 || e.firstWalk+1 >= n || n-e.readWalk >= QuotaRecheckEvery
}

// Discover is DiscoverQuotas through the cache. A walk that ctx ends early forgets nothing.
func (q *QuotaCache) Discover(ctx context.Context, l *Layout, opts WalkOptions) ([]Cgroup, []WalkError) {
	h := l.CPU
	if h == nil {
		return nil, nil
	}
	if q.dirs == nil {
		q.dirs = map[string]*quotaEntry{}
	}
	q.walks++
	n := q.walks
	var probe []dirProbe
	var entries []*quotaEntry // of probe
	var seen []*quotaEntry    // every directory of this walk, in walk order
	var paths []string
	var errs []WalkError
	walkDirs(h.MountPoint, func(dir string) bool {
		if ctx.Err() != nil {
			return false
		}
		p := h.Path(dir)
		if opts.Keep != nil && !opts.Keep(p) {
			return true
		}
		e := q.dirs[p]
		if e == nil {
			e = &quotaEntry{firstWalk: n}
			q.dirs[p] = e
		}
		e.seenWalk = n
		if e.due(n) {
			probe = append(probe, dirProbe{h: h, dir: dir, path: p, cpu: true, quotaOnly: true})
			entries = append(entries, e)
		}
		seen = append(seen, e)
		paths = append(paths, p)
		return true
	}, func(dir string, err error) {
		errs = append(errs, WalkError{Path: h.Path(dir), Err: err})
	})
	complete := ctx.Err() == nil
	errs = append(errs, probeAll(ctx, opts, probe)...)
	for i, d := range probe {
		// A directory whose read failed or did not run keeps readWalk and is read next walk.
		if d.probed {
			e := entries[i]
			e.max, e.has, e.readWalk = d.cpuMax, d.hasCPUMax, n
		}
	}
	if complete {
		for p, e := range q.dirs {
			if e.seenWalk != n {
				delete(q.dirs, p)
			}
		}
	}
	var out []Cgroup
	for i, e := range seen {
		if e.has && e.max.Limited() {
			out = append(out, Cgroup{Path: paths[i], Identity: ParseIdentity(paths[i], opts.BareRuntime),
				InCPU: true, InMemory: l.Memory == h, CPUMax: e.max, HasCPUMax: true})
		}
	}
	return out, errs
}
