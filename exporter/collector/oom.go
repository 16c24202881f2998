//go:build linux

package collector

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

func init() {
	register("oom", true, "OOM kills of cgroups that are already gone: cgroup v2 memory.events watched with inotify, "+
		"v1 memory.oom_control notifications through cgroup.event_control and an eventfd; kept under the dead container's identity for "+
		defaultOOMRetention.String()+" (--oom.retention)", newOOMCollector, oomWatchedDesc, oomUnwatchedDesc)
}

var (
	oomWatchedDesc = prometheus.NewDesc(namespace+"_exporter_oom_watched_cgroups",
		"quota_exporter: cgroups whose OOM kills the oom collector watches (v2 inotify watches, v1 eventfds).", nil, nil)
	oomUnwatchedDesc = prometheus.NewDesc(namespace+"_exporter_oom_unwatched_cgroups",
		"quota_exporter: watched memory cgroups the oom collector could not watch (v1: beyond its descriptor budget, or cgroup.event_control not writable; v2: no inotify watch left). Their kills are lost if they are removed before a scrape.", nil, nil)
)

// defaultOOMRetention is how long quota_memory_oom_kills_total of a removed cgroup is still
// exported: when the kernel OOM-kills a container's main process the runtime removes its
// cgroup, often within a second and before the next scrape. Fifteen minutes cover several
// scrape intervals and the 5-minute windows of increase() in rules and alerts, so the kill
// shows up against the dead container's cgroup, pod_uid and container_id; the series then
// ends like any other of a deleted container.
const defaultOOMRetention = 15 * time.Minute

// newOOMCollector watches memory.events (v2) or memory.oom_control (v1).
func newOOMCollector(env *Env) (Collector, error) {
	l := env.Cgroups.Layout()
	switch {
	case l.Memory == nil:
		return noOOM{}, nil
	case l.Memory.Version == 2:
		return newOOMv2Collector(env)
	default:
		return newOOMv1Collector(env)
	}
}

// noOOM is the collector without a memory hierarchy.
type noOOM struct{}

func (noOOM) Update(context.Context, chan<- prometheus.Metric) error { return nil }

// oomRetained are the OOM kills of cgroups that are gone, kept for the retention.
type oomRetained struct {
	retention time.Duration
	mu        sync.Mutex
	gone      map[string]oomGone
}

type oomGone struct {
	cg    cgroupfs.Cgroup
	kills uint64
	until time.Time
}

func newOOMRetained(cfg Config) *oomRetained {
	r := cfg.OOMRetention
	if r <= 0 {
		r = defaultOOMRetention
	}
	return &oomRetained{retention: r, gone: map[string]oomGone{}}
}

// keep retains a removed cgroup's count, when it saw a kill.
func (r *oomRetained) keep(cg cgroupfs.Cgroup, kills uint64) {
	if kills == 0 {
		return
	}
	r.mu.Lock()
	r.gone[cg.Path] = oomGone{cg: cg, kills: kills, until: time.Now().Add(r.retention)}
	r.mu.Unlock()
}

// forget drops a path that is watched again: a cgroup re-created under the same path starts afresh.
func (r *oomRetained) forget(path string) {
	r.mu.Lock()
	delete(r.gone, path)
	r.mu.Unlock()
}

func (r *oomRetained) expire() {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, g := range r.gone {
		if now.After(g.until) {
			delete(r.gone, p)
		}
	}
}

// collect exports the retained counts, except where discovery sees the path again (the
// memory collector exports that one), so no cgroup has two series.
func (r *oomRetained) collect(ctx context.Context, env *Env, ch chan<- prometheus.Metric) {
	r.expire()
	cgs, _ := env.Cgroups.Cgroups(ctx)
	live := make(map[string]bool, len(cgs))
	for _, cg := range cgs {
		live[cg.Path] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, g := range r.gone {
		if !live[p] {
			// A container that died young may have been watched before the kubelet's log
			// directories named it, or named it only by its pod (the container's link came
			// later): name it now, so that its kill keeps one label set.
			unnamed := g.cg.Names == (cgroupfs.KubeNames{}) || g.cg.Names.Container == "" && g.cg.Identity.ContainerID != ""
			if unnamed && env.PodNames != nil {
				env.PodNames.Name(&g.cg)
				r.gone[p] = g
			}
			newEmitter(ch, cgroupLabels, cgroupLabelValues(g.cg)).counter(memOOMKillsDesc, float64(g.kills))
		}
	}
}

// oomWatchLoop runs s now and every oomRediscover until ctx ends, then closes done. Between
// syncs it first asks s.unchanged (a directory walk, no file read) and skips the sync, whose
// full discovery reads every cgroup.procs, while no memory cgroup came or went.
func oomWatchLoop(ctx context.Context, done chan<- struct{}, s *oomSyncer) {
	defer close(done)
	t := time.NewTicker(oomRediscover)
	defer t.Stop()
	for {
		if s.unchanged == nil || !s.unchanged(ctx) { // its first call always asks for a sync
			select {
			case <-s.start(ctx):
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// memoryDirsUnchanged returns the rediscovery loop's check: whether the memory cgroup
// directories are the same as at its previous call. A call that finds a change (or the first
// one) records the new set before the sync that follows it runs, so a cgroup created during
// that sync shows as a change at the next call; and the call after a change asks for one more
// sync, because a runtime writes a new cgroup's limits and PIDs after its mkdir, and
// discovery watches only cgroups with either. Only the loop's goroutine calls it.
func memoryDirsUnchanged(env *Env) func(context.Context) bool {
	var prev map[string]bool
	settling := false
	return func(ctx context.Context) bool {
		paths, ok := env.Cgroups.MemoryPaths(ctx)
		if !ok {
			prev = nil
			return false
		}
		same := prev != nil && len(paths) == len(prev)
		for _, p := range paths {
			same = same && prev[p]
		}
		if !same {
			prev = make(map[string]bool, len(paths))
			for _, p := range paths {
				prev[p] = true
			}
			settling = true
			return false
		}
		if settling {
			settling = false
			return false
		}
		return true
	}
}

// oomSyncer runs a watcher's sync one at a time, for its rediscovery loop and for scrapes.
// A sync reads memory.events (v2) or registers eventfds (v1) of new cgroups outside the
// cpu and memory collectors' gate: a scrape waits for it within cgroupReadBudget (at most
// half of what is left of the scrape), so a file blocked in the kernel leaves that scrape
// with the counts it has, and later scrapes join the same run instead of starting more.
type oomSyncer struct {
	sync func(context.Context)
	// unchanged, if set, tells the rediscovery loop that no watched cgroup came or went.
	unchanged func(context.Context) bool
	runs      singleflight.Group
}

func (s *oomSyncer) start(ctx context.Context) <-chan singleflight.Result {
	return s.runs.DoChan("sync", func() (any, error) {
		s.sync(ctx)
		return nil, nil
	})
}

// await starts or joins a sync and waits for it within the scrape's budget; it returns
// procread.ErrTimeout when the sync did not end in time.
func (s *oomSyncer) await(ctx context.Context) error {
	budget := cgroupReadBudget
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, max(time.Until(dl)/2, 10*time.Millisecond))
	}
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case <-s.start(ctx):
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	return fmt.Errorf("%w: the OOM watcher's sync of new cgroups is still running (a memory.events read or eventfd registration blocked in the kernel?); this scrape exports the counts it has", procread.ErrTimeout)
}

// syncForScrape runs the watcher's sync for a scrape, and counts one that overran.
func (s *oomSyncer) syncForScrape(ctx context.Context, env *Env) {
	if err := s.await(ctx); err != nil {
		newTally("oom", env.Errors).add("oom watcher sync", err)
	}
}

// oomWatchCandidates lists the cgroups whose OOM kills are watched (seen) and those of them
// not watched yet (fresh): every watched memory cgroup but the root (its kills are the
// host's). Not only those with a limit: the kill is counted in the victim's cgroup, which
// may have none of its own (a limit on the pod only).
func oomWatchCandidates(ctx context.Context, env *Env, mu *sync.Mutex, watched func(path string) bool) (seen map[string]bool, fresh []cgroupfs.Cgroup) {
	cgs, _ := env.Cgroups.Cgroups(ctx)
	seen = make(map[string]bool, len(cgs))
	mu.Lock()
	defer mu.Unlock()
	for _, cg := range cgs {
		if cg.InMemory && cg.Path != "/" {
			seen[cg.Path] = true
			if !watched(cg.Path) {
				fresh = append(fresh, cg)
			}
		}
	}
	return seen, fresh
}

// oomExport sends the watcher's gauges (counts, called under mu) and the retained counts.
func oomExport(ctx context.Context, env *Env, ch chan<- prometheus.Metric, r *oomRetained, mu *sync.Mutex, counts func() (watched, unwatched int)) {
	mu.Lock()
	watched, unwatched := counts()
	mu.Unlock()
	ch <- prometheus.MustNewConstMetric(oomWatchedDesc, prometheus.GaugeValue, float64(watched))
	ch <- prometheus.MustNewConstMetric(oomUnwatchedDesc, prometheus.GaugeValue, float64(unwatched))
	r.collect(ctx, env, ch)
}

// oomRediscover is how often the watcher looks for new cgroups between scrapes.
const oomRediscover = 5 * time.Second

// oomCgroup is one watched memory.events file and the last oom_kill count read from it.
type oomCgroup struct {
	cg    cgroupfs.Cgroup
	dir   string
	file  string
	wd    int32
	kills uint64
	// lost: a change of memory.events came, but the cgroup was gone before the watcher
	// could read it (a runtime removes an OOM-killed container's cgroup within a second; a
	// loaded exporter can be later). parentBase and observedBase are the parent's
	// hierarchical oom_kill and oomCollector.observed of the parent when the watch began:
	// what the parent counted since, less what its children were seen to count, is the
	// lost cgroup's (see attributeLost).
	lost                     bool
	parentOK                 bool // parentBase was read
	parentBase, observedBase uint64
}

// oomCollector watches memory.events of every watched v2 cgroup with inotify (the kernel
// notifies changes of that file), re-reads oom_kill on each change, and exports the count of
// cgroups that disappeared. Live cgroups' counts are the memory collector's.
type oomCollector struct {
	env      *Env
	fd       int      // the inotify instance
	file     *os.File // fd through the runtime poller, so that Close ends a blocked Read
	cancel   context.CancelFunc
	done     chan struct{}
	retained *oomRetained
	syncs    *oomSyncer

	mu        sync.Mutex
	byWD      map[int32]*oomCgroup
	byPath    map[string]*oomCgroup
	unwatched int // candidates of the last sync without a watch (no inotify watch left)
	// observed sums, by parent path, the increases of oom_kill the watcher read from the
	// parent's watched children (and attributed to lost ones).
	observed map[string]uint64
}

func newOOMv2Collector(env *Env) (Collector, error) {
	c := &oomCollector{env: env, fd: -1, byWD: map[int32]*oomCgroup{}, byPath: map[string]*oomCgroup{}, observed: map[string]uint64{}, retained: newOOMRetained(env.Config)}
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	c.fd, c.file = fd, os.NewFile(uintptr(fd), "inotify")
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go c.events()
	c.syncs = &oomSyncer{sync: c.sync, unchanged: memoryDirsUnchanged(env)}
	go oomWatchLoop(ctx, make(chan struct{}), c.syncs)
	return c, nil
}

// Close stops the watcher.
func (c *oomCollector) Close() {
	c.cancel()
	c.file.Close() // ends the read in events
	<-c.done
}

// sync adds watches for new cgroups and retires the ones discovery no longer returns.
func (c *oomCollector) sync(ctx context.Context) {
	seen, fresh := oomWatchCandidates(ctx, c.env, &c.mu, func(p string) bool { return c.byPath[p] != nil })
	l := c.env.Cgroups.Layout()
	unwatched := 0
	for _, cg := range fresh {
		dir := l.Memory.Dir(cg.Path)
		file := filepath.Join(dir, "memory.events")
		wd, err := syscall.InotifyAddWatch(c.fd, file, syscall.IN_MODIFY)
		if err != nil {
			if err == syscall.ENOSPC { // fs.inotify.max_user_watches
				unwatched++
			}
			continue // gone already: nothing to watch
		}
		w := &oomCgroup{cg: cg, dir: dir, file: file, wd: int32(wd)}
		w.kills, _ = readOOMKills(dir)
		w.parentBase, w.parentOK = c.readParent(w)
		c.mu.Lock()
		w.observedBase = c.observed[parentPath(cg.Path)]
		c.byWD[w.wd], c.byPath[cg.Path] = w, w
		c.mu.Unlock()
		c.retained.forget(cg.Path)
	}
	if ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	c.unwatched = unwatched
	var gone []*oomCgroup
	for p, w := range c.byPath {
		if !seen[p] {
			gone = append(gone, w)
		}
	}
	c.mu.Unlock()
	// Discovery may see a removal before the watcher has read the events that preceded it
	// (a kill just before the runtime's rmdir): such a cgroup is taken as lost.
	for _, w := range gone {
		c.retireGone(w, true)
	}
}

func parentPath(p string) string { return path.Dir(p) }

// readParent reads the hierarchical oom_kill of w's parent; false for a child of the root
// (whose kills are the host's, and which has no memory.events) or when it cannot be read.
func (c *oomCollector) readParent(w *oomCgroup) (uint64, bool) {
	parent := parentPath(w.cg.Path)
	if parent == "/" || parent == "." {
		return 0, false
	}
	k, err := readOOMKills(c.env.Cgroups.Layout().Memory.Dir(parent))
	return k, err == nil
}

// retireGone retires a watched cgroup that is gone; when a change of its memory.events was
// (or may have been) lost, its parent's count (read outside the lock) tells what it missed.
func (c *oomCollector) retireGone(w *oomCgroup, mayBeLost bool) {
	c.mu.Lock()
	lost := w.lost || mayBeLost
	c.mu.Unlock()
	var parentNow uint64
	var ok bool
	var siblings []string
	if lost && w.parentOK {
		parentNow, ok = c.readParent(w)
		siblings, ok = childCgroups(filepath.Dir(w.dir), parentPath(w.cg.Path), ok)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byWD[w.wd] != w {
		return // retired meanwhile
	}
	for _, s := range siblings {
		// A child the watcher does not watch (a cgroup discovery does not keep: no process,
		// no limit) may have counted the parent's kills: nothing to attribute.
		ok = ok && c.byPath[s] != nil
	}
	if ok {
		c.attributeLost(w, parentNow)
	}
	c.retire(w)
}

// childCgroups lists the cgroup paths of the directories in dir (the parent's, at path p).
func childCgroups(dir, p string, ok bool) ([]string, bool) {
	if !ok {
		return nil, false
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, false
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, path.Join(p, e.Name()))
		}
	}
	return out, true
}

// attributeLost gives a lost cgroup the kills its parent counted since the watch began that
// no watched child accounts for; retireGone calls it only when every other child of the
// parent is watched. Exact when the dead container was the only child of its pod killed in
// that time without being seen; a sibling that was born and killed between two discoveries
// (or a process of the pod cgroup itself) would be counted against it too. c.mu held.
func (c *oomCollector) attributeLost(w *oomCgroup, parentNow uint64) {
	parent := parentPath(w.cg.Path)
	explained := c.observed[parent] - w.observedBase
	if parentNow > w.parentBase+explained {
		extra := parentNow - w.parentBase - explained
		w.kills += extra
		c.observed[parent] += extra
	}
}

// retire moves a cgroup that is gone to the retained set (only when it saw a kill). c.mu held.
func (c *oomCollector) retire(w *oomCgroup) {
	delete(c.byWD, w.wd)
	delete(c.byPath, w.cg.Path)
	delete(c.observed, w.cg.Path) // as a parent
	parent := parentPath(w.cg.Path)
	siblings := false
	for p := range c.byPath {
		siblings = siblings || parentPath(p) == parent
	}
	if !siblings {
		delete(c.observed, parent)
	}
	_, _ = syscall.InotifyRmWatch(c.fd, uint32(w.wd))
	c.retained.keep(w.cg, w.kills)
}

// events reads inotify events: a change of memory.events re-reads oom_kill at once, before
// the runtime removes the cgroup; IN_IGNORED means the cgroup was removed.
func (c *oomCollector) events() {
	defer close(c.done)
	buf := make([]byte, 64*(syscall.SizeofInotifyEvent+syscall.NAME_MAX+1))
	for {
		n, err := c.file.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			c.mu.Lock()
			w := c.byWD[ev.Wd]
			c.mu.Unlock()
			if w == nil {
				continue
			}
			if ev.Mask&syscall.IN_MODIFY != 0 {
				k, err := readOOMKills(w.dir)
				c.mu.Lock()
				switch {
				case err == nil:
					if k > w.kills {
						c.observed[parentPath(w.cg.Path)] += k - w.kills
					}
					w.kills = k
				default: // gone (ENOENT, or ENODEV for a file opened as kernfs removed it)
					w.lost = true
				}
				c.mu.Unlock()
			}
			if ev.Mask&syscall.IN_IGNORED != 0 {
				c.retireGone(w, false)
			}
		}
	}
}

func readOOMKills(dir string) (uint64, error) {
	m, err := cgroupfs.ReadMemoryEvents(dir)
	if err != nil {
		return 0, err
	}
	return m["oom_kill"], nil
}

// Update exports the OOM kills of removed cgroups still within the retention.
func (c *oomCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	c.syncs.syncForScrape(ctx, c.env)
	oomExport(ctx, c.env, ch, c.retained, &c.mu, func() (int, int) { return len(c.byPath), c.unwatched })
	return nil
}
