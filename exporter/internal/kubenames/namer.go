//go:build linux

package kubenames

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// Namer gives cgroups their Kubernetes names (namespace, pod, container) from the kubelet's
// log directories and tells pods' sandboxes from their containers: the cgroup source's
// namer (cgroups.Namer). Its resolver refreshes on its own clock (one readdir of each
// directory every 30 s, sooner after a miss).
type Namer struct {
	r        *Resolver
	procPath string
	// sandboxes are the container cgroups found to be sandboxes (by path), kept while
	// discovery lists them: a sandbox stays one.
	sandboxes map[string]bool
	// unlinked: when each container of a known pod was first seen without its link, while
	// it stays so (Cgroup.Unlinked).
	unlinked map[string]time.Time
	now      func() time.Time
}

// LinkGrace is how long a container of a known pod without a link in the kubelet's log
// directory is held back (Cgroup.Unlinked). The kubelet links a container within a second
// of its start, and the resolver looks again after a miss within its MissInterval (5 s), so
// a container is normally exported from the next walk on, named. One never linked is
// exported by its pod's names after it; where the containers directory has no link at all
// (not mounted) none is held back.
const LinkGrace = time.Minute

// NewNamer names from the kubelet's log directories under podLogs (the host's /var/log),
// reading processes' comm under procPath; nil when podLogs is "": no names.
func NewNamer(podLogs, procPath string) *Namer {
	if podLogs == "" {
		return nil
	}
	return &Namer{r: New(podLogs, Options{}), procPath: procPath, sandboxes: map[string]bool{},
		unlinked: map[string]time.Time{}, now: time.Now}
}

// Stats returns the resolver's counters.
func (n *Namer) Stats() Stats { return n.r.Stats() }

// Name fills each cgroup's Kubernetes names from its container id or, for pod-level cgroups
// and sandboxes, its pod UID. Called by one walk at a time.
func (n *Namer) Name(cgs []cgroupid.Cgroup) {
	seen := make(map[string]bool, len(n.sandboxes))
	unlinked := make(map[string]bool, len(n.unlinked))
	now := n.now()
	for i := range cgs {
		cg := &cgs[i]
		// A container of a pod the kubelet knows that it has not linked: the sandbox, or a
		// container the kubelet is starting.
		if !n.NameCgroup(cg) || cg.Kind != cgroupid.KindContainer || cg.Names.Container != "" {
			continue
		}
		if n.isSandbox(cg) {
			cg.Kind = cgroupid.KindSandbox
			seen[cg.Path] = true
			continue
		}
		if !n.r.Linking() {
			continue // no link will name it: exported by its pod's names at once
		}
		first, ok := n.unlinked[cg.Path]
		if !ok {
			first = now
			n.unlinked[cg.Path] = now
		}
		unlinked[cg.Path] = true
		cg.Unlinked = now.Sub(first) < LinkGrace
	}
	for p := range n.sandboxes {
		if !seen[p] {
			delete(n.sandboxes, p)
		}
	}
	for p := range n.unlinked {
		if !unlinked[p] {
			delete(n.unlinked, p)
		}
	}
}

// NameCgroup fills one cgroup's names from its container id or, for pod-level cgroups and
// sandboxes, its pod UID; it reports whether they were found.
func (n *Namer) NameCgroup(cg *cgroupid.Cgroup) bool {
	id := cg.Identity
	if id.ContainerID != "" && cg.Kind != cgroupid.KindSandbox {
		if c, ok := n.r.Container(id.ContainerID, id.PodUID); ok {
			cg.Names = cgroupid.KubeNames{Namespace: c.Namespace, Pod: c.Pod, Container: c.Name}
			return true
		}
	}
	if id.PodUID == "" {
		return false
	}
	p, ok := n.r.Pod(id.PodUID)
	if ok {
		cg.Names = cgroupid.KubeNames{Namespace: p.Namespace, Pod: p.Name}
	}
	return ok
}

// isSandbox tells the pod's sandbox (pause, or CRI-O's infra container) from a container
// the kubelet has not linked yet. The kubelet links every container it starts in
// <podlogs>/containers, never the sandbox; it links a container only after the runtime
// started it, so an unlinked container cgroup of a pod the kubelet knows is the sandbox when
// what runs in it is the pause process: every process the exporter sees there is named
// "pause", or it sees none (CRI-O's cgroup for a dropped infra container is empty, and outside
// the host's PID namespace no process is seen). A tenant that names its own process "pause"
// is taken for a sandbox only until the kubelet links it, and harms no one else.
func (n *Namer) isSandbox(cg *cgroupid.Cgroup) bool {
	if n.sandboxes[cg.Path] {
		return true
	}
	for _, pid := range cg.PIDs {
		ctx, cancel := context.WithTimeout(context.Background(), sandboxCommBudget)
		comm, err := procread.ReadFile(ctx, filepath.Join(n.procPath, strconv.Itoa(pid), "comm"), 64)
		cancel()
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return false // unknown: decided again next walk
		}
		if err == nil && strings.TrimSuffix(string(comm), "\n") != "pause" {
			return false
		}
	}
	n.sandboxes[cg.Path] = true
	return true
}

// sandboxCommBudget bounds the read of one process's comm (a kernel string, answered at once).
const sandboxCommBudget = 500 * time.Millisecond
