//go:build linux

package collector

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
)

func init() {
	register("oom", true, "OOM kills of cgroups that are already gone: cgroup v2 memory.events watched with inotify, kept under the dead container's identity for "+oomRetention.String(), newOOMCollector)
}

// oomRetention is how long quota_memory_oom_kills_total of a removed cgroup is still
// exported: when the kernel OOM-kills a container's main process the runtime removes its
// cgroup, often within a second and before the next scrape. Fifteen minutes cover several
// scrape intervals and the 5-minute windows of increase() in rules and alerts, so the kill
// shows up against the dead container's cgroup, pod_uid and container_id; the series then
// ends like any other of a deleted container.
const oomRetention = 15 * time.Minute

// oomRediscover is how often the watcher looks for new cgroups between scrapes.
const oomRediscover = 5 * time.Second

// oomCgroup is one watched memory.events file and the last oom_kill count read from it.
type oomCgroup struct {
	cg    cgroupfs.Cgroup
	dir   string
	file  string
	wd    int32
	kills uint64
	until time.Time // set when the cgroup is gone
}

// oomCollector watches memory.events of every watched v2 cgroup with inotify (the kernel
// notifies changes of that file), re-reads oom_kill on each change, and exports the count of
// cgroups that disappeared. Live cgroups' counts are the memory collector's. On v1 (no
// memory.events) it does nothing.
type oomCollector struct {
	env    *Env
	fd     int      // the inotify instance, -1 when not watching
	file   *os.File // fd through the runtime poller, so that Close ends a blocked Read
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	byWD   map[int32]*oomCgroup
	byPath map[string]*oomCgroup
	gone   map[string]*oomCgroup
}

func newOOMCollector(env *Env) (Collector, error) {
	c := &oomCollector{env: env, fd: -1, byWD: map[int32]*oomCgroup{}, byPath: map[string]*oomCgroup{}, gone: map[string]*oomCgroup{}}
	l := env.Cgroups.Layout()
	if l.Memory == nil || l.Memory.Version != 2 {
		return c, nil
	}
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	c.fd, c.file = fd, os.NewFile(uintptr(fd), "inotify")
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go c.events()
	go func() {
		t := time.NewTicker(oomRediscover)
		defer t.Stop()
		for {
			c.sync(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return c, nil
}

// Close stops the watcher.
func (c *oomCollector) Close() {
	if c.fd < 0 {
		return
	}
	c.cancel()
	c.file.Close() // ends the read in events
	<-c.done
}

// sync adds watches for new cgroups and retires the ones discovery no longer returns.
func (c *oomCollector) sync(ctx context.Context) {
	cgs, _ := c.env.Cgroups.Cgroups(ctx)
	l := c.env.Cgroups.Layout()
	seen := make(map[string]bool, len(cgs))
	for _, cg := range cgs {
		if !cg.InMemory || cg.Path == "/" {
			continue
		}
		seen[cg.Path] = true
		c.mu.Lock()
		_, known := c.byPath[cg.Path]
		c.mu.Unlock()
		if known {
			continue
		}
		dir := l.Memory.Dir(cg.Path)
		file := filepath.Join(dir, "memory.events")
		wd, err := syscall.InotifyAddWatch(c.fd, file, syscall.IN_MODIFY)
		if err != nil {
			continue // gone already, or not a kernel file (fixture trees): nothing to watch
		}
		w := &oomCgroup{cg: cg, dir: dir, file: file, wd: int32(wd)}
		w.kills, _ = readOOMKills(dir)
		c.mu.Lock()
		c.byWD[w.wd], c.byPath[cg.Path] = w, w
		delete(c.gone, cg.Path) // a cgroup re-created under the same path starts afresh
		c.mu.Unlock()
	}
	if ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, w := range c.byPath {
		if !seen[p] {
			c.retire(w)
		}
	}
	now := time.Now()
	for p, w := range c.gone {
		if now.After(w.until) {
			delete(c.gone, p)
		}
	}
}

// retire moves a cgroup that is gone to the retained set (only when it saw a kill). c.mu held.
func (c *oomCollector) retire(w *oomCgroup) {
	delete(c.byWD, w.wd)
	delete(c.byPath, w.cg.Path)
	_, _ = syscall.InotifyRmWatch(c.fd, uint32(w.wd))
	if w.kills > 0 {
		w.until = time.Now().Add(oomRetention)
		c.gone[w.cg.Path] = w
	}
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
				if k, err := readOOMKills(w.dir); err == nil {
					c.mu.Lock()
					w.kills = k
					c.mu.Unlock()
				}
			}
			if ev.Mask&syscall.IN_IGNORED != 0 {
				c.mu.Lock()
				if c.byWD[ev.Wd] == w {
					c.retire(w)
				}
				c.mu.Unlock()
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

// Update exports the OOM kills of removed cgroups still within oomRetention, except where
// discovery sees the path again (the memory collector exports that one).
func (c *oomCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	if c.fd < 0 {
		return nil
	}
	c.sync(ctx)
	cgs, _ := c.env.Cgroups.Cgroups(ctx)
	live := make(map[string]bool, len(cgs))
	for _, cg := range cgs {
		live[cg.Path] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, w := range c.gone {
		if !live[p] {
			newEmitter(ch, cgroupLabels, cgroupLabelValues(w.cg)).counter(memOOMKillsDesc, float64(w.kills))
		}
	}
	return nil
}
