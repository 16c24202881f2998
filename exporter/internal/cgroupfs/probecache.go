//go:build linux

package cgroupfs

import (
	"sync"
	"time"
)

// ProbeCache makes discovery incremental: it keeps every directory's quota and memory limit
// between walks and reads them again only for directories new to this walk or to the
// previous one (a runtime creates the directory before it writes the limits), and for the
// others once they are older than MaxAge. Limits change only when a container is resized,
// and re-reading a thousand unchanged quota and limit files was a tenth of a scrape and most
// of the idle sampler's cost after its own reads. cgroup.procs is still read every walk.
// Set it as WalkOptions.Cache; safe for concurrent use.
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
	readAt                        time.Time
	cpuMax                        CPUMax
	hasCPUMax                     bool
	memLimit                      uint64
	hasMemLimit                   bool
}

// lookup marks the walk's directories whose limits are fresh in the cache as cached (read
// skips them) and fills them in. It returns the walk's number.
func (c *ProbeCache) lookup(dirs []dirProbe) uint64 {
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
		if e.readWalk == 0 || e.firstWalk+1 >= n || now.Sub(e.readAt) >= maxAge {
			continue
		}
		d.limitsCached = true
		d.cpuMax, d.hasCPUMax, d.memLimit, d.hasMemLimit = e.cpuMax, e.hasCPUMax, e.memLimit, e.hasMemLimit
	}
	return n
}

// store keeps what walk n read; a directory whose read failed or did not run is read again
// next walk. complete: the walk saw every directory, so the ones it did not see are gone.
func (c *ProbeCache) store(n uint64, dirs []dirProbe, complete bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for _, d := range dirs {
		e := c.dirs[d.dir]
		if e == nil || !d.probed || d.limitsCached {
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
