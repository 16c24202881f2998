//go:build linux

package oomwatch

import (
	"sync"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

// DefaultRetention is how long the OOM kills of a removed cgroup are still exported: when
// the kernel OOM-kills a container's main process the runtime removes its cgroup, often
// within a second and before the next scrape. Fifteen minutes cover several scrape
// intervals and the 5-minute windows of increase() in rules and alerts, so the kill shows up
// against the dead container's cgroup, pod_uid and container_id; the series then ends like
// any other of a deleted container.
const DefaultRetention = 15 * time.Minute

// Gone is a removed cgroup's OOM kills.
type Gone struct {
	Cgroup cgroupid.Cgroup
	Kills  uint64
}

// Retained are the OOM kills of cgroups that are gone, kept for the retention.
type Retained struct {
	retention time.Duration
	name      func(*cgroupid.Cgroup)
	mu        sync.Mutex
	gone      map[string]retainedKills
}

type retainedKills struct {
	cg    cgroupid.Cgroup
	kills uint64
	until time.Time
}

// NewRetained keeps kills for retention (0: DefaultRetention); name, if set, names a
// cgroup again at export (see Gone).
func NewRetained(retention time.Duration, name func(*cgroupid.Cgroup)) *Retained {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return &Retained{retention: retention, name: name, gone: map[string]retainedKills{}}
}

// Keep retains a removed cgroup's count, when it saw a kill.
func (r *Retained) Keep(cg cgroupid.Cgroup, kills uint64) {
	if kills == 0 {
		return
	}
	r.mu.Lock()
	r.gone[cg.Path] = retainedKills{cg: cg, kills: kills, until: time.Now().Add(r.retention)}
	r.mu.Unlock()
}

// Learn takes the names (and kind: a sandbox is told from a container only once the kubelet
// links its containers) a later walk gave a cgroup that is retained, or is watched and about
// to be: the watcher's copy is the walk's that first saw the cgroup, often before the kubelet
// linked it, and a container that died may have no link left to name it from at export.
func (r *Retained) Learn(cg cgroupid.Cgroup) {
	if cg.Names == (cgroupid.KubeNames{}) {
		return
	}
	r.mu.Lock()
	if g, ok := r.gone[cg.Path]; ok {
		g.cg.Names, g.cg.Kind = cg.Names, cg.Kind
		r.gone[cg.Path] = g
	}
	r.mu.Unlock()
}

// Forget drops a path that is watched again: a cgroup re-created under the same path starts afresh.
func (r *Retained) Forget(path string) {
	r.mu.Lock()
	delete(r.gone, path)
	r.mu.Unlock()
}

// Gone returns the retained kills within the retention, except those whose path live says
// is there again (the memory collector exports that one), so no cgroup has two series.
func (r *Retained) Gone(live func(path string) bool) []Gone {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Gone
	for p, g := range r.gone {
		if now.After(g.until) {
			delete(r.gone, p)
			continue
		}
		if live(p) {
			continue
		}
		// A container that died young may have been watched before the kubelet's log
		// directories named it, or named it only by its pod (the container's link came
		// later): name it now, so that its kill keeps one label set.
		unnamed := g.cg.Names == (cgroupid.KubeNames{}) || g.cg.Names.Container == "" && g.cg.Identity.ContainerID != ""
		if unnamed && r.name != nil {
			r.name(&g.cg)
			r.gone[p] = g
		}
		out = append(out, Gone{Cgroup: g.cg, Kills: g.kills})
	}
	return out
}
