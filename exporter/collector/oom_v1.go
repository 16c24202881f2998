//go:build linux

package collector

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
)

// cgroup v1 has no memory.events and no change notification of memory.oom_control; its OOM
// API is an eventfd registered through cgroup.event_control ("<eventfd> <fd of
// memory.oom_control>"). The kernel signals it when the memcg, or an ancestor whose limit
// binds, enters OOM (mem_cgroup_oom_notify runs before mem_cgroup_out_of_memory picks a
// victim), and once more when the cgroup is removed. Registration is a write to the
// cgroup tree: it needs a writable cgroup mount (docs/cgroups.md).

// oomV1Checks are when a notified cgroup's oom_kill is read again, counted from the
// notification: the kill follows the notification, usually within microseconds.
var oomV1Checks = [...]time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond}

// oomV1RemovalWait bounds how long a checker that found the directory gone waits for the
// kernel's removal notification (sent from a workqueue some milliseconds after rmdir), to
// tell it apart from OOM notifications.
const oomV1RemovalWait = time.Second

// oomV1Cgroup is one registered memory.oom_control notification.
type oomV1Cgroup struct {
	cg  cgroupfs.Cgroup
	dir string
	efd int // the eventfd; closed (and removed from the maps) under the collector's mu only
	// Guarded by the collector's mu:
	kills       uint64 // oom_kill as last read
	signals     uint64 // notifications read while the directory existed, not yet explained by a rise of oom_kill
	goneSignals uint64 // notifications read after the directory was gone: one of them is the removal
	pending     bool   // a notification the checker has not started on
	busy        bool   // a checker goroutine runs for this cgroup
	dropped     bool   // discovery no longer lists it
}

// oomV1Collector registers an eventfd for every watched v1 memory cgroup, epolls them in one
// goroutine, and on a notification re-reads oom_kill in a checker goroutine (one per
// notified cgroup at a time) until it rose; the count of a cgroup that is gone is retained.
type oomV1Collector struct {
	env      *Env
	retained *oomRetained
	budget   int // eventfds at most
	epfd     int
	wake     int // eventfd that Close signals to end the epoll loop
	ctx      context.Context
	cancel   context.CancelFunc
	loopDone chan struct{}
	syncDone chan struct{}
	syncs    *oomSyncer

	mu           sync.Mutex
	closed       bool
	byFD         map[int32]*oomV1Cgroup
	byPath       map[string]*oomV1Cgroup
	unwatched    int   // candidates of the last sync without an eventfd
	disabled     error // registration failed for good (read-only mount): logged once
	warnedBudget bool
}

// oomV1Budget is the eventfds the watcher may hold: half of what the throttle sampler leaves
// to discovery, scrapes and connections (descriptorBudget), so together they stay below
// RLIMIT_NOFILE with a quarter of it (and at least 256) still free.
func oomV1Budget() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	limit := int(min(l.Cur, 1<<30))
	return min(limit, max(limit/4, 512)) / 2
}

func newOOMv1Collector(env *Env) (Collector, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(env.Cgroups.Layout().Memory.MountPoint, &st); err != nil || st.Type != unix.CGROUP_SUPER_MAGIC {
		return noOOM{}, nil // a fixture tree: no kernel to notify
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err == nil {
		err = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)})
	}
	if err != nil {
		unix.Close(epfd)
		if wake >= 0 {
			unix.Close(wake)
		}
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &oomV1Collector{env: env, retained: newOOMRetained(env.Config), budget: oomV1Budget(), epfd: epfd, wake: wake,
		ctx: ctx, cancel: cancel, loopDone: make(chan struct{}), syncDone: make(chan struct{}),
		byFD: map[int32]*oomV1Cgroup{}, byPath: map[string]*oomV1Cgroup{}}
	go c.loop()
	c.syncs = &oomSyncer{sync: c.sync, unchanged: memoryDirsUnchanged(env)}
	go oomWatchLoop(ctx, c.syncDone, c.syncs)
	return c, nil
}

// oomV1CloseWait bounds Close: the loops end at once; only a discovery walk in progress can
// take longer, and it holds no descriptor of ours.
const oomV1CloseWait = time.Second

// Close ends the loops and checkers and closes the eventfds (which unregisters them in the
// kernel). It returns within oomV1CloseWait.
func (c *oomV1Collector) Close() {
	c.cancel()
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(c.wake, one[:])
	timeout := time.After(oomV1CloseWait)
	for _, done := range []chan struct{}{c.loopDone, c.syncDone} {
		select {
		case <-done:
		case <-timeout:
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, w := range c.byPath {
		c.unwatch(w)
	}
	unix.Close(c.epfd) // the loop has returned, or returns on EBADF
	unix.Close(c.wake)
}

// sync registers new cgroups and retires those discovery no longer lists.
func (c *oomV1Collector) sync(ctx context.Context) {
	seen, fresh := oomWatchCandidates(ctx, c.env, &c.mu, func(p string) bool { return c.byPath[p] != nil })
	l := c.env.Cgroups.Layout()
	unwatched := 0
	for _, cg := range fresh {
		c.mu.Lock()
		full := len(c.byPath) >= c.budget
		disabled := c.disabled != nil || c.closed
		c.mu.Unlock()
		if disabled || full {
			unwatched++
			continue
		}
		dir := l.Memory.Dir(cg.Path)
		if dir == "" {
			continue
		}
		if err := c.watch(cg, dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			unwatched++
		}
	}
	if ctx.Err() != nil {
		return
	}
	var drop []*oomV1Cgroup
	c.mu.Lock()
	c.unwatched = unwatched
	warn := unwatched > 0 && c.disabled == nil && !c.warnedBudget && len(c.byPath) >= c.budget
	c.warnedBudget = c.warnedBudget || warn
	for p, w := range c.byPath {
		if !seen[p] && !w.dropped {
			w.dropped = true // a running checker retires it when done
			drop = append(drop, w)
		}
	}
	c.mu.Unlock()
	if warn { // logged outside mu: a log write can block
		c.env.Logger.Warn("oom: descriptor budget used up; the OOM kills of further v1 cgroups are lost if they are removed before a scrape",
			"budget", c.budget, "unwatched", unwatched)
	}
	for _, w := range drop {
		k, ok, err := cgroupfs.ReadOOMKillsV1(w.dir) // it may still exist (no process, no limit)
		c.mu.Lock()
		if !w.busy {
			if err == nil && ok && k > w.kills {
				w.kills = k
			}
			c.retire(w)
		}
		c.mu.Unlock()
	}
}

// watch registers an eventfd for cg's memory.oom_control and reads the count it starts from.
func (c *oomV1Collector) watch(cg cgroupfs.Cgroup, dir string) error {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return err
	}
	if err := registerOOMEventfd(dir, efd); err != nil {
		unix.Close(efd)
		if errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			c.mu.Lock()
			first := c.disabled == nil
			c.disabled = err
			c.mu.Unlock()
			if first {
				c.env.Logger.Warn("oom: cannot register v1 OOM notifications (cgroup.event_control is not writable: mount the host's cgroup tree read-write); kills of removed cgroups are not kept", "err", err)
			}
		}
		return err
	}
	// Read after registering: a kill between the two is then both counted and notified.
	kills, _, _ := cgroupfs.ReadOOMKillsV1(dir)
	w := &oomV1Cgroup{cg: cg, dir: dir, efd: efd, kills: kills}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.byPath[cg.Path]; dup || c.closed { // a concurrent sync (scrape and loop) was first
		unix.Close(efd)
		return nil
	}
	if err := unix.EpollCtl(c.epfd, unix.EPOLL_CTL_ADD, efd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(efd)}); err != nil {
		unix.Close(efd)
		return err
	}
	c.byFD[int32(efd)], c.byPath[cg.Path] = w, w
	c.retained.forget(cg.Path)
	return nil
}

// registerOOMEventfd writes "<eventfd> <fd of memory.oom_control>" to cgroup.event_control;
// the kernel keeps its own reference, so memory.oom_control is closed right after.
func registerOOMEventfd(dir string, efd int) error {
	cfd, err := unix.Open(filepath.Join(dir, "memory.oom_control"), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer unix.Close(cfd)
	f, err := os.OpenFile(filepath.Join(dir, "cgroup.event_control"), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(strconv.Itoa(efd) + " " + strconv.Itoa(cfd))
	return err
}

// unwatch closes a cgroup's eventfd and forgets it. c.mu held.
func (c *oomV1Collector) unwatch(w *oomV1Cgroup) {
	delete(c.byFD, int32(w.efd))
	delete(c.byPath, w.cg.Path)
	if w.efd >= 0 {
		_ = unix.EpollCtl(c.epfd, unix.EPOLL_CTL_DEL, w.efd, nil)
		unix.Close(w.efd)
		w.efd = -1
	}
}

// retire stops watching a cgroup and retains its count (when it saw a kill). c.mu held.
func (c *oomV1Collector) retire(w *oomV1Cgroup) {
	if c.byPath[w.cg.Path] != w {
		return
	}
	c.unwatch(w)
	c.retained.keep(w.cg, w.kills)
}

// loop waits for notifications. It reads each eventfd under mu, so an eventfd cannot be
// closed (and its number reused by another file) between the lookup and the read; the read
// is non-blocking.
func (c *oomV1Collector) loop() {
	defer close(c.loopDone)
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(c.epfd, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || c.ctx.Err() != nil {
			return
		}
		for _, ev := range events[:n] {
			c.mu.Lock()
			w := c.byFD[ev.Fd]
			var cnt uint64
			if w != nil {
				var b [8]byte
				if m, err := unix.Read(w.efd, b[:]); err == nil && m == 8 {
					cnt = binary.NativeEndian.Uint64(b[:])
				}
			}
			c.mu.Unlock()
			if cnt > 0 {
				c.notified(w, cnt)
			}
		}
	}
}

// notified records cnt notifications and starts the cgroup's checker unless it runs.
func (c *oomV1Collector) notified(w *oomV1Cgroup, cnt uint64) {
	_, err := os.Lstat(w.dir)
	gone := errors.Is(err, os.ErrNotExist)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byPath[w.cg.Path] != w {
		return // retired meanwhile (discovery dropped it): its count was read then
	}
	if gone {
		w.goneSignals += cnt
	} else {
		w.signals += cnt
	}
	w.pending = true
	if !w.busy && !c.closed {
		w.busy = true
		go c.check(w)
	}
}

// check re-reads oom_kill after each notification on the oomV1Checks schedule until it rose.
// When the directory is gone before the count could be read, the notifications that were
// not the removal are counted as one kill: the count itself died with the cgroup. This is an
// approximation (several kills between the last read and the removal count as one; an OOM
// that killed nothing, because its victim was already exiting, counts as one).
func (c *oomV1Collector) check(w *oomV1Cgroup) {
	for {
		c.mu.Lock()
		if !w.pending || c.closed {
			w.busy = false
			if w.dropped && !c.closed {
				c.retire(w)
			}
			c.mu.Unlock()
			return
		}
		w.pending = false
		round := w.signals // the notifications this round explains or gives up on
		c.mu.Unlock()

		start := time.Now()
		explained := false
		for _, at := range oomV1Checks {
			if !c.sleepUntil(start.Add(at)) {
				return // closed
			}
			c.mu.Lock()
			before := w.signals // notifications that precede this read
			c.mu.Unlock()
			k, ok, err := cgroupfs.ReadOOMKillsV1(w.dir)
			if errors.Is(err, os.ErrNotExist) {
				c.removed(w)
				return
			}
			c.mu.Lock()
			if err == nil && ok && k > w.kills {
				w.kills, w.signals, explained = k, w.signals-before, true
			}
			c.mu.Unlock()
			if explained {
				break
			}
		}
		if !explained { // notified, but nothing was killed (the victim was already exiting)
			c.mu.Lock()
			w.signals -= min(round, w.signals)
			c.mu.Unlock()
		}
	}
}

// removed settles a cgroup whose directory is gone and retires it. Notifications read while
// the directory existed and not explained by a rise of oom_kill mean a kill. Of those read
// after it was gone one is the removal, so it waits (up to oomV1RemovalWait) for a second:
// an OOM notification the loop read late, after the runtime had removed the cgroup.
func (c *oomV1Collector) removed(w *oomV1Cgroup) {
	c.mu.Lock()
	c.retained.keep(w.cg, w.kills) // the count read so far is exported while it waits
	c.mu.Unlock()
	deadline := time.Now().Add(oomV1RemovalWait)
	for {
		c.mu.Lock()
		known := w.signals > 0 || w.goneSignals > 1
		c.mu.Unlock()
		if known || time.Now().After(deadline) || !c.sleepUntil(time.Now().Add(50*time.Millisecond)) {
			break
		}
	}
	c.mu.Lock()
	counted := w.signals > 0 || w.goneSignals > 1
	if counted {
		w.kills++ // one, however many notifications: see check
	}
	w.busy = false
	if !c.closed {
		c.retire(w)
	}
	c.mu.Unlock()
	if counted {
		c.env.Logger.Debug("oom: a removed cgroup's kill counted from its notifications (the count was gone before it could be read)", "cgroup", w.cg.Path)
	}
}

// sleepUntil waits until t or the collector's end; false when it ended.
func (c *oomV1Collector) sleepUntil(t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// Update exports the OOM kills of removed cgroups still within the retention.
func (c *oomV1Collector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	c.syncs.syncForScrape(ctx, c.env)
	oomExport(ctx, c.env, ch, c.retained, &c.mu, func() (int, int) { return len(c.byPath), c.unwatched })
	return nil
}
