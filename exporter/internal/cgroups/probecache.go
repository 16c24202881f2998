//go:build linux

package cgroups

import (
	"sync"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
)

// ProbeCache makes discovery incremental for the directories it does not export: it keeps
// every directory's quota and memory limit between walks, and reads them again every walk
// for the directories the previous walk exported or that hold processes now (an in-place
// resize shows within one scrape), for directories new to this walk or to the previous one
// (a runtime creates the directory before it writes the limits), and for the others once
// they are older than MaxAge (a limit set on an empty slice shows within MaxAge).
// cgroup.procs is read every walk. Set it as WalkOptions.Cache; nil reads everything every
// walk; safe for concurrent use.
type ProbeCache struct {
	MaxAge time.Duration // 0: DefaultProbeCacheAge

	mu    sync.Mutex
	walks uint64
	dirs  map[string]*probeEntry // by directory (one per hierarchy on v1)
}

// DefaultProbeCacheAge matches the cgroup source's cache of the other CPU settings.
const DefaultProbeCacheAge = 30 * time.Second

type probeEntry struct {
	firstWalk, seenWalk, readWalk uint64
	exported                      bool // by the last walk that saw it
	readAt                        time.Time
	cpuMax                        cgroupfs.CPUMax
	hasCPUMax                     bool
	memLimit                      uint64
	hasMemLimit                   bool
}

// lookup marks the walk's directories whose limits are fresh in the cache as cached (read
// skips them) and fills them in. It returns the walk's number.
func (c *ProbeCache) lookup(dirs []dirProbe) uint64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs == nil {
		c.dirs = map[string]*probeEntry{}
	}
	maxAge := c.MaxAge
	if maxAge <= 0 {
		maxAge = DefaultProbeCacheAge
	}
	c.walks++
	n, now := c.walks, time.Now()
	for i := range dirs {
		d := &dirs[i]
		e := c.dirs[d.dir]
		if e == nil {
			e = &probeEntry{firstWalk: n}
			c.dirs[d.dir] = e
		}
		e.seenWalk = n
		if e.readWalk == 0 || e.exported || e.firstWalk+1 >= n || now.Sub(e.readAt) >= maxAge {
			continue
		}
		d.limitsCached = true
		d.cpuMax, d.hasCPUMax, d.memLimit, d.hasMemLimit = e.cpuMax, e.hasCPUMax, e.memLimit, e.hasMemLimit
	}
	return n
}

// store keeps what walk n read and which directories it exported; a directory whose read
// failed or did not run is read again next walk. complete: the walk saw every directory, so the ones it did not see are gone.
func (c *ProbeCache) store(n uint64, dirs []dirProbe, complete bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for _, d := range dirs {
		e := c.dirs[d.dir]
		if e == nil {
			continue
		}
		if e.seenWalk == n { // a later walk's view is newer
			e.exported = d.exported
		}
		if !d.probed || d.limitsCached {
			continue
		}
		e.readWalk, e.readAt = n, now
		e.cpuMax, e.hasCPUMax, e.memLimit, e.hasMemLimit = d.cpuMax, d.hasCPUMax, d.memLimit, d.hasMemLimit
	}
	if complete && n == c.walks { // a later walk's view is newer
		for dir, e := range c.dirs {
			if e.seenWalk != n {
				delete(c.dirs, dir)
			}
		}
	}
}
