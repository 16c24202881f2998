//go:build linux

package oomwatch

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/fdbudget"
)

// cgroup v1 has no memory.events and no change notification of memory.oom_control; its OOM
// API is an eventfd registered through cgroup.event_control ("<eventfd> <fd of
// memory.oom_control>"). The kernel signals it when the memcg, or an ancestor whose limit
// binds, enters OOM (mem_cgroup_oom_notify runs before mem_cgroup_out_of_memory picks a
// victim), and once more when the cgroup is removed. Registration is a write to the
// cgroup tree: it needs a writable cgroup mount (docs/cgroups.md).

// eventfdChecks are when a notified cgroup's oom_kill is read again, counted from the
// notification: the kill follows the notification, usually within microseconds.
var eventfdChecks = [...]time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond}

// eventfdRemovalWait bounds how long a checker that found the directory gone waits for the
// kernel's removal notification (sent from a workqueue some milliseconds after rmdir), to
// tell it apart from OOM notifications.
const eventfdRemovalWait = time.Second

// eventfd is the cgroup v1 backend: an eventfd per watched cgroup, epolled by one goroutine;
// on a notification a checker goroutine (one per notified cgroup at a time) re-reads
// oom_kill until it rose. Each eventfd is taken from the descriptor budget.
type eventfd struct {
	w        *Watcher
	budget   *fdbudget.Budget
	epfd     int
	wake     int // eventfd that close signals to end the epoll loop
	ctx      context.Context
	cancel   context.CancelFunc
	loopDone chan struct{}
	disabled error // registration failed for good (read-only mount): logged once. Guarded by w.mu.
}

// eventfdState are a cgroup's notifications not yet explained. The eventfd itself is
// cgroup.handle (-1 once closed, under w.mu only). Guarded by w.mu.
type eventfdState struct {
	signals     uint64 // notifications read while the directory existed, not yet explained by a rise of oom_kill
	goneSignals uint64 // notifications read after the directory was gone: one of them is the removal
	pending     bool   // a notification the checker has not started on
	busy        bool   // a checker goroutine runs for this cgroup
	dropped     bool   // the feed no longer lists it
}

func newEventfd(w *Watcher, budget *fdbudget.Budget) (*eventfd, error) {
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
	b := &eventfd{w: w, budget: budget, epfd: epfd, wake: wake, ctx: ctx, cancel: cancel, loopDone: make(chan struct{})}
	go b.loop()
	return b, nil
}

// watch registers an eventfd for c's memory.oom_control and reads the count it starts from.
func (b *eventfd) watch(c *cgroup) error {
	b.w.mu.Lock()
	disabled := b.disabled
	b.w.mu.Unlock()
	if disabled != nil {
		return disabled
	}
	if b.budget.Take(1) == 0 {
		return errBudget
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err == nil {
		if err = registerOOMEventfd(c.dir, efd); err != nil {
			unix.Close(efd)
		}
	}
	if err != nil {
		b.budget.Release(1)
		if errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			b.w.mu.Lock()
			first := b.disabled == nil
			b.disabled = err
			b.w.mu.Unlock()
			if first {
				b.w.logger.Warn("oom: cannot register v1 OOM notifications (cgroup.event_control is not writable: mount the host's cgroup tree read-write); kills of removed cgroups are not kept", "err", err)
			}
		}
		return err
	}
	// Read after registering: a kill between the two is then both counted and notified.
	c.handle = int32(efd)
	c.kills, _, _ = cgroupfs.ReadOOMKillsV1(c.dir)
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

// start adds the eventfd to the epoll set, under w.mu with its registration: the loop finds
// every notification's cgroup.
func (b *eventfd) start(c *cgroup) error {
	return unix.EpollCtl(b.epfd, unix.EPOLL_CTL_ADD, int(c.handle), &unix.EpollEvent{Events: unix.EPOLLIN, Fd: c.handle})
}

// drop reads the count of a cgroup the feed no longer lists (it may still exist: no
// process, no limit) and retires it, or leaves that to its running checker.
func (b *eventfd) drop(c *cgroup) {
	w := b.w
	w.mu.Lock()
	skip := c.dropped || !w.current(c)
	c.dropped = true // a running checker retires it when done
	w.mu.Unlock()
	if skip {
		return
	}
	k, ok, err := cgroupfs.ReadOOMKillsV1(c.dir)
	w.mu.Lock()
	if !c.busy {
		if err == nil && ok && k > c.kills {
			c.kills = k
		}
		w.retire(c)
	}
	w.mu.Unlock()
}

// unwatch closes c's eventfd (which unregisters it in the kernel) and returns it to the budget.
func (b *eventfd) unwatch(c *cgroup) {
	if c.handle >= 0 {
		_ = unix.EpollCtl(b.epfd, unix.EPOLL_CTL_DEL, int(c.handle), nil)
		unix.Close(int(c.handle))
		c.handle = -1
		b.budget.Release(1)
	}
}

// close ends the loop and the checkers; the Watcher has closed the eventfds.
func (b *eventfd) close() {
	b.cancel()
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(b.wake, one[:])
	select {
	case <-b.loopDone:
	case <-time.After(CloseWait):
	}
	unix.Close(b.epfd) // the loop has returned, or returns on EBADF
	unix.Close(b.wake)
}

// loop waits for notifications. It reads each eventfd under w.mu, so an eventfd cannot be
// closed (and its number reused by another file) between the lookup and the read; the read
// is non-blocking.
func (b *eventfd) loop() {
	defer close(b.loopDone)
	w := b.w
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(b.epfd, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || b.ctx.Err() != nil {
			return
		}
		for _, ev := range events[:n] {
			w.mu.Lock()
			c := w.lookup(ev.Fd)
			var cnt uint64
			if c != nil {
				var buf [8]byte
				if m, err := unix.Read(int(c.handle), buf[:]); err == nil && m == 8 {
					cnt = binary.NativeEndian.Uint64(buf[:])
				}
			}
			w.mu.Unlock()
			if cnt > 0 {
				b.notified(c, cnt)
			}
		}
	}
}

// notified records cnt notifications and starts the cgroup's checker unless it runs.
func (b *eventfd) notified(c *cgroup, cnt uint64) {
	_, err := os.Lstat(c.dir)
	gone := errors.Is(err, os.ErrNotExist)
	w := b.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.current(c) {
		return // retired meanwhile (the feed dropped it): its count was read then
	}
	if gone {
		c.goneSignals += cnt
	} else {
		c.signals += cnt
	}
	c.pending = true
	if !c.busy && !w.closed {
		c.busy = true
		go b.check(c)
	}
}

// check re-reads oom_kill after each notification on the eventfdChecks schedule until it
// rose. When the directory is gone before the count could be read, the notifications that
// were not the removal are counted as one kill: the count itself died with the cgroup. This
// is an approximation (several kills between the last read and the removal count as one; an
// OOM that killed nothing, because its victim was already exiting, counts as one).
func (b *eventfd) check(c *cgroup) {
	w := b.w
	for {
		w.mu.Lock()
		if !c.pending || w.closed {
			c.busy = false
			if c.dropped && !w.closed {
				w.retire(c)
			}
			w.mu.Unlock()
			return
		}
		c.pending = false
		round := c.signals // the notifications this round explains or gives up on
		w.mu.Unlock()

		start := time.Now()
		explained := false
		for _, at := range eventfdChecks {
			if !b.sleepUntil(start.Add(at)) {
				return // closed
			}
			w.mu.Lock()
			before := c.signals // notifications that precede this read
			w.mu.Unlock()
			k, ok, err := cgroupfs.ReadOOMKillsV1(c.dir)
			if errors.Is(err, os.ErrNotExist) {
				b.removed(c)
				return
			}
			w.mu.Lock()
			if err == nil && ok && k > c.kills {
				c.kills, c.signals, explained = k, c.signals-before, true
			}
			w.mu.Unlock()
			if explained {
				break
			}
		}
		if !explained { // notified, but nothing was killed (the victim was already exiting)
			w.mu.Lock()
			c.signals -= min(round, c.signals)
			w.mu.Unlock()
		}
	}
}

// removed settles a cgroup whose directory is gone and retires it. Notifications read while
// the directory existed and not explained by a rise of oom_kill mean a kill. Of those read
// after it was gone one is the removal, so it waits (up to eventfdRemovalWait) for a second:
// an OOM notification the loop read late, after the runtime had removed the cgroup.
func (b *eventfd) removed(c *cgroup) {
	w := b.w
	w.mu.Lock()
	w.retained.Keep(c.cg, c.kills) // the count read so far is exported while it waits
	w.mu.Unlock()
	deadline := time.Now().Add(eventfdRemovalWait)
	for {
		w.mu.Lock()
		known := c.signals > 0 || c.goneSignals > 1
		w.mu.Unlock()
		if known || time.Now().After(deadline) || !b.sleepUntil(time.Now().Add(50*time.Millisecond)) {
			break
		}
	}
	w.mu.Lock()
	counted := c.signals > 0 || c.goneSignals > 1
	if counted {
		c.kills++ // one, however many notifications: see check
	}
	c.busy = false
	if !w.closed {
		w.retire(c)
	}
	w.mu.Unlock()
	if counted {
		w.logger.Debug("oom: a removed cgroup's kill counted from its notifications (the count was gone before it could be read)", "cgroup", c.cg.Path)
	}
}

// sleepUntil waits until t or the backend's end; false when it ended.
func (b *eventfd) sleepUntil(t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-b.ctx.Done():
		return false
	}
}
