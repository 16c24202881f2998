//go:build linux

// Package oomwatch counts the OOM kills of memory cgroups as they happen, so that the kill
// of a container whose cgroup the runtime removes within a second is still known, and keeps
// it for a retention under the dead cgroup's identity.
//
// The Watcher is the bookkeeping: which cgroups are watched (fed from outside, what came
// and went), their kill counts, the ones it could not watch, and the retained counts of
// those that are gone. A backend delivers the kernel's notifications: inotify on memory.events
// for cgroup v2 (inotify.go), an eventfd registered through cgroup.event_control on
// memory.oom_control for v1 (eventfd.go).
package oomwatch

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"path"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/fdbudget"
)

// ErrUnsupported is New's error when there is nothing to watch: no memory hierarchy, or a
// v1 hierarchy that is not a kernel cgroup mount (a fixture tree: no kernel to notify).
var ErrUnsupported = errors.New("oomwatch: no kernel memory cgroup hierarchy to watch")

// errGone is a backend's answer for a cgroup that is gone before it could be watched:
// nothing to watch and nothing to count.
var errGone = fs.ErrNotExist

// errBudget is a backend's answer when the descriptor budget is used up.
var errBudget = errors.New("descriptor budget used up")

// CloseWait bounds Close: the backend's loop ends at once when woken.
const CloseWait = time.Second

// Config is what a Watcher is made of.
type Config struct {
	Layout *cgroupfs.Layout
	// Retention is how long a removed cgroup's kills are kept; 0 means DefaultRetention.
	Retention time.Duration
	// Descriptors is the budget the v1 eventfds are taken from (shared with the throttle
	// sampler); nil gives v1 none.
	Descriptors *fdbudget.Budget
	Logger      *slog.Logger
	// Name, if set, names a retained cgroup again when it was watched before the kubelet named
	// it (see Retained.Gone).
	Name func(*cgroupid.Cgroup)
}

// backend delivers one cgroup version's OOM notifications to the Watcher. The Watcher calls
// watch and drop outside its mutex (they read and register files), start and unwatch with it
// held; the backend's own goroutines take the Watcher's mutex for the bookkeeping.
type backend interface {
	// watch sets up c's notification and reads the count it starts from (c.handle, c.kills).
	// errGone: c is gone; any other error counts c as unwatched until it is tried again.
	watch(c *cgroup) error
	// start makes c's notifications count, once the Watcher registered it.
	start(c *cgroup) error
	// drop retires c, which the feed no longer lists (it may still exist, or be gone with a
	// notification unread).
	drop(c *cgroup)
	// unwatch ends c's notification; the Watcher has removed it from its maps.
	unwatch(c *cgroup)
	// close ends the backend's goroutines within CloseWait and frees its descriptors.
	close()
}

// cgroup is one watched memory cgroup. cg, dir and handle do not change once it is
// registered; the rest is guarded by Watcher.mu.
type cgroup struct {
	cg     cgroupid.Cgroup
	dir    string // its directory in the memory hierarchy
	handle int32  // the backend's key of its notifications: inotify watch (v2), eventfd (v1)
	kills  uint64 // oom_kill as last read, plus kills attributed to it when a read was lost
	inotifyState
	eventfdState
}

// Watcher is the bookkeeping of OOM watching, shared by both backends.
type Watcher struct {
	layout   *cgroupfs.Layout
	logger   *slog.Logger
	b        backend
	retained *Retained

	watchMu sync.Mutex // one Watch at a time

	mu        sync.Mutex
	closed    bool
	byPath    map[string]*cgroup
	byHandle  map[int32]*cgroup
	unwatched map[string]cgroupid.Cgroup // could not watch (budget, no inotify watch left, refused): tried again at each Watch
	warned    bool                       // the budget's warning was logged
}

// New starts a watcher with the backend of the memory hierarchy's version.
func New(cfg Config) (*Watcher, error) {
	l := cfg.Layout
	if l == nil || l.Memory == nil {
		return nil, ErrUnsupported
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{layout: l, logger: logger, retained: NewRetained(cfg.Retention, cfg.Name),
		byPath: map[string]*cgroup{}, byHandle: map[int32]*cgroup{}, unwatched: map[string]cgroupid.Cgroup{}}
	var err error
	if l.Memory.Version == 2 {
		w.b, err = newInotify(w)
	} else {
		var st unix.Statfs_t
		if err := unix.Statfs(l.Memory.MountPoint, &st); err != nil || st.Type != unix.CGROUP_SUPER_MAGIC {
			return nil, ErrUnsupported
		}
		w.b, err = newEventfd(w, cfg.Descriptors)
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Watch starts watching the added cgroups and retires the removed ones (paths): what came
// and went. The root is never watched (its kills are the host's). Cgroups it could not
// watch are tried again at each call until they are removed. When ctx ends, it stops
// before retiring anything.
func (w *Watcher) Watch(ctx context.Context, added []cgroupid.Cgroup, removed []string) {
	w.watchMu.Lock()
	defer w.watchMu.Unlock()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	try := maps.Clone(w.unwatched)
	for _, cg := range added {
		if w.byPath[cg.Path] == nil && cg.Path != "/" {
			try[cg.Path] = cg // an unwatched one with the identity just discovered
		}
	}
	w.mu.Unlock()

	full := false
	for _, cg := range try {
		err := w.add(cg)
		full = full || errors.Is(err, errBudget)
		w.mu.Lock()
		if err == nil || errors.Is(err, errGone) {
			delete(w.unwatched, cg.Path)
		} else {
			w.unwatched[cg.Path] = cg
		}
		w.mu.Unlock()
	}
	if ctx.Err() != nil {
		return
	}
	var drop []*cgroup
	w.mu.Lock()
	for _, p := range removed {
		delete(w.unwatched, p)
		if c := w.byPath[p]; c != nil {
			drop = append(drop, c)
		}
	}
	warn := full && !w.warned
	w.warned = w.warned || warn
	unwatched := len(w.unwatched)
	w.mu.Unlock()
	if warn { // outside mu: a log write can block
		w.logger.Warn("oom: descriptor budget used up; the OOM kills of further v1 cgroups are lost if they are removed before a scrape",
			"unwatched", unwatched)
	}
	// The feed may see a removal before the backend has read the notifications that preceded
	// it (a kill just before the runtime's rmdir): the backend settles such a cgroup.
	for _, c := range drop {
		w.b.drop(c)
	}
}

// WatchChanges is Watch fed with what a discovery found came and went (a delta of the
// cgroup source): the added cgroups that are in the memory hierarchy, the removed ones' paths.
func (w *Watcher) WatchChanges(ctx context.Context, added, removed []cgroupid.Cgroup) {
	var in []cgroupid.Cgroup
	for _, cg := range added {
		if cg.InMemory {
			in = append(in, cg)
		}
	}
	gone := make([]string, len(removed))
	for i, cg := range removed {
		gone[i] = cg.Path
		w.learn(cg)
	}
	w.Watch(ctx, in, gone)
}

// learn keeps the names the last walk that saw a removed cgroup gave it (see Retained.Learn).
func (w *Watcher) learn(cg cgroupid.Cgroup) {
	if cg.Names == (cgroupid.KubeNames{}) {
		return
	}
	w.mu.Lock()
	if c := w.byPath[cg.Path]; c != nil {
		c.cg.Names, c.cg.Kind = cg.Names, cg.Kind
	}
	w.mu.Unlock()
	w.retained.Learn(cg)
}

// Sync is Watch fed with a full listing (a discovery): what came is what the listing has
// and the watcher does not watch, what went the other way round.
func (w *Watcher) Sync(ctx context.Context, cgs []cgroupid.Cgroup) {
	seen := make(map[string]bool, len(cgs))
	var added []cgroupid.Cgroup
	var removed []string
	w.mu.Lock()
	for _, cg := range cgs {
		if cg.InMemory && cg.Path != "/" {
			seen[cg.Path] = true
			if w.byPath[cg.Path] == nil {
				added = append(added, cg)
			}
		}
	}
	for p := range w.byPath {
		if !seen[p] {
			removed = append(removed, p)
		}
	}
	for p := range w.unwatched {
		if !seen[p] {
			removed = append(removed, p)
		}
	}
	w.mu.Unlock()
	w.Watch(ctx, added, removed)
}

// add watches one cgroup through the backend and registers it.
func (w *Watcher) add(cg cgroupid.Cgroup) error {
	dir := w.layout.Memory.Dir(cg.Path)
	if dir == "" {
		return errGone // outside the mount: nothing to watch
	}
	c := &cgroup{cg: cg, dir: dir}
	if err := w.b.watch(c); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.b.unwatch(c)
		return nil
	}
	w.byPath[cg.Path], w.byHandle[c.handle] = c, c
	if err := w.b.start(c); err != nil {
		w.forget(c)
		return err
	}
	w.retained.Forget(cg.Path) // a cgroup re-created under the same path starts afresh
	return nil
}

// current tells whether c is still watched (not retired meanwhile). w.mu held.
func (w *Watcher) current(c *cgroup) bool { return w.byPath[c.cg.Path] == c }

// lookup finds the cgroup of a notification's handle. w.mu held.
func (w *Watcher) lookup(handle int32) *cgroup { return w.byHandle[handle] }

// forget stops watching c without retaining its count. w.mu held.
func (w *Watcher) forget(c *cgroup) {
	if !w.current(c) {
		return
	}
	delete(w.byPath, c.cg.Path)
	delete(w.byHandle, c.handle)
	w.b.unwatch(c)
}

// retire stops watching a cgroup that is gone, or no longer listed, and retains its count
// (when it saw a kill). w.mu held.
func (w *Watcher) retire(c *cgroup) {
	if !w.current(c) {
		return
	}
	w.forget(c)
	w.retained.Keep(c.cg, c.kills)
}

// Counts are the cgroups watched and those that could not be.
func (w *Watcher) Counts() (watched, unwatched int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byPath), len(w.unwatched)
}

// Retained are the kills of the cgroups that are gone.
func (w *Watcher) Retained() *Retained { return w.retained }

// Close stops watching: it ends the backend's goroutines and closes its descriptors, within
// CloseWait. Watch does nothing afterwards.
func (w *Watcher) Close() {
	w.mu.Lock()
	w.closed = true
	for _, c := range w.byPath {
		w.forget(c)
	}
	w.mu.Unlock()
	w.b.close()
}

func parentPath(p string) string { return path.Dir(p) }
