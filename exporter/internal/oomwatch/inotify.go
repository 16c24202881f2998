//go:build linux

package oomwatch

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"unsafe"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

// inotify is the cgroup v2 backend: the kernel notifies changes of memory.events, and the
// backend re-reads oom_kill on each, before the runtime removes the cgroup; IN_IGNORED means
// the cgroup was removed.
type inotify struct {
	w    *Watcher
	fd   int      // the inotify instance
	file *os.File // fd through the runtime poller, so that Close ends a blocked Read
	done chan struct{}
	// observed sums, by parent path, the increases of oom_kill the backend read from the
	// parent's watched children (and attributed to lost ones). Guarded by w.mu.
	observed map[string]uint64
}

// inotifyState is what attributes a lost read. lost: a change of memory.events came, but the
// cgroup was gone before the backend could read it (a runtime removes an OOM-killed
// container's cgroup within a second; a loaded exporter can be later). parentBase and
// observedBase are the parent's hierarchical oom_kill and observed of the parent when the
// watch began: what the parent counted since, less what its children were seen to count, is
// the lost cgroup's (see attributeLost).
type inotifyState struct {
	lost                     bool
	parentOK                 bool // parentBase was read
	parentBase, observedBase uint64
	// tree is memory.events' oom_kill (with the descendants') as last read: what observed
	// sums. kills is the same for a container; for other cgroups, when the kernel has
	// memory.events.local (ownLocal, decided at watch), that file's: the cgroup's own kills,
	// as the memory collector exports them (cgroupid.OOMKillsWithDescendants).
	tree     uint64
	ownLocal bool
}

func newInotify(w *Watcher) (*inotify, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	b := &inotify{w: w, fd: fd, file: os.NewFile(uintptr(fd), "inotify"), done: make(chan struct{}), observed: map[string]uint64{}}
	go b.events()
	return b, nil
}

func (b *inotify) watch(c *cgroup) error {
	wd, err := syscall.InotifyAddWatch(b.fd, filepath.Join(c.dir, "memory.events"), syscall.IN_MODIFY)
	if err == syscall.ENOSPC {
		return fmt.Errorf("no inotify watch left (fs.inotify.max_user_watches): %w", err)
	}
	if err != nil {
		return errGone // nothing to watch
	}
	c.handle = int32(wd)
	c.tree, _ = readKills(c.dir)
	c.kills = c.tree
	if !cgroupid.OOMKillsWithDescendants(c.cg.Kind) {
		if own, ok, err := cgroupfs.ReadOOMKillsLocal(c.dir); ok && err == nil {
			c.kills, c.ownLocal = own, true
		}
	}
	c.parentBase, c.parentOK = b.readParent(c)
	return nil
}

func (b *inotify) start(c *cgroup) error {
	c.observedBase = b.observed[parentPath(c.cg.Path)]
	return nil
}

func (b *inotify) drop(c *cgroup) { b.retireGone(c, true) }

func (b *inotify) unwatch(c *cgroup) {
	delete(b.observed, c.cg.Path) // as a parent
	parent := parentPath(c.cg.Path)
	siblings := false
	for p := range b.w.byPath {
		siblings = siblings || parentPath(p) == parent
	}
	if !siblings {
		delete(b.observed, parent)
	}
	_, _ = syscall.InotifyRmWatch(b.fd, uint32(c.handle))
}

func (b *inotify) close() {
	b.file.Close() // ends the read in events
	<-b.done
}

// readParent reads the hierarchical oom_kill of c's parent; false for a child of the root
// (whose kills are the host's, and which has no memory.events) or when it cannot be read.
func (b *inotify) readParent(c *cgroup) (uint64, bool) {
	parent := parentPath(c.cg.Path)
	if parent == "/" || parent == "." {
		return 0, false
	}
	k, err := readKills(b.w.layout.Memory.Dir(parent))
	return k, err == nil
}

// retireGone retires a watched cgroup that is gone; when a change of its memory.events was
// (or may have been) lost, its parent's count (read outside the lock) tells what it missed.
func (b *inotify) retireGone(c *cgroup, mayBeLost bool) {
	w := b.w
	w.mu.Lock()
	lost := c.lost || mayBeLost
	w.mu.Unlock()
	var parentNow uint64
	var ok bool
	var siblings []string
	if lost && c.parentOK {
		parentNow, ok = b.readParent(c)
		siblings, ok = childCgroups(filepath.Dir(c.dir), parentPath(c.cg.Path), ok)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.current(c) {
		return // retired meanwhile
	}
	for _, s := range siblings {
		// A child the watcher does not watch (a cgroup discovery does not keep: no process,
		// no limit) may have counted the parent's kills: nothing to attribute.
		ok = ok && w.byPath[s] != nil
	}
	if ok {
		b.attributeLost(c, parentNow)
	}
	w.retire(c)
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
// (or a process of the pod cgroup itself) would be counted against it too. w.mu held.
func (b *inotify) attributeLost(c *cgroup, parentNow uint64) {
	parent := parentPath(c.cg.Path)
	explained := b.observed[parent] - c.observedBase
	if parentNow > c.parentBase+explained {
		extra := parentNow - c.parentBase - explained
		if !c.ownLocal {
			// A cgroup that counts its own kills only cannot tell them from its
			// descendants' (exported there) in its parent's count: nothing is added.
			c.kills += extra
		}
		b.observed[parent] += extra
	}
}

// events reads inotify events: a change of memory.events re-reads oom_kill at once, before
// the runtime removes the cgroup; IN_IGNORED means the cgroup was removed.
func (b *inotify) events() {
	defer close(b.done)
	w := b.w
	buf := make([]byte, 64*(syscall.SizeofInotifyEvent+syscall.NAME_MAX+1))
	for {
		n, err := b.file.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			w.mu.Lock()
			c := w.lookup(ev.Wd)
			w.mu.Unlock()
			if c == nil {
				continue
			}
			if ev.Mask&syscall.IN_MODIFY != 0 {
				k, err := readKills(c.dir)
				own := k
				if err == nil && c.ownLocal {
					own, _, err = cgroupfs.ReadOOMKillsLocal(c.dir)
				}
				w.mu.Lock()
				if err == nil {
					if k > c.tree {
						b.observed[parentPath(c.cg.Path)] += k - c.tree
					}
					c.tree, c.kills = k, own
				} else { // gone (ENOENT, or ENODEV for a file opened as kernfs removed it)
					c.lost = true
				}
				w.mu.Unlock()
			}
			if ev.Mask&syscall.IN_IGNORED != 0 {
				b.retireGone(c, false)
			}
		}
	}
}

// readKills reads the processes the OOM killer killed from a v2 cgroup's memory.events
// (cgroupfs.OOMKilled: a group kill's victim once).
func readKills(dir string) (uint64, error) {
	m, err := cgroupfs.ReadMemoryEvents(dir)
	if err != nil {
		return 0, err
	}
	return cgroupfs.OOMKilled(m["oom_kill"], m["oom_group_kill"]), nil
}
