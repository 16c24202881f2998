// Package kubenames resolves Kubernetes names (namespace, pod, container) from the kubelet's
// log directories, so the exporter can name workloads without API credentials.
//
// Every kubelet (all CRI runtimes) writes
//
//	<podlogs>/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log
//	<podlogs>/containers/<pod>_<namespace>_<container>-<container id>.log  (symlinks into pods/)
//
// Namespaces, pod and container names are DNS labels/subdomains, which cannot contain '_', so
// the names split unambiguously. The kubelet cuts a containers/ name at 251 characters before
// ".log" (kuberuntime logSymlink: ext4's 255), which can cut the container id: such a link's
// target (pods/<namespace>_<pod>_<uid>/<container>/<n>.log) names the container, and the id
// left in the name is a prefix of the real one. The resolver lists directories and reads
// those cut links' targets (readlink): it never opens a log file and never follows a symlink.
// A refresh costs one readdir of pods/ and one of containers/, and a readlink per cut link.
package kubenames

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Pod names a pod.
type Pod struct {
	Namespace, Name string
}

// Container names a container.
type Container struct {
	Namespace, Pod, Name string
}

// DefaultMissInterval is how soon a lookup that missed reads the directories again.
const DefaultMissInterval = 5 * time.Second

// Options tune a Resolver. Zero values take the defaults.
type Options struct {
	// Interval between refreshes (default 30s). A lookup that misses refreshes early, at
	// most every MissInterval (default 5s), so a new pod is named on the next scrape.
	Interval, MissInterval time.Duration
	// MaxEntries caps the pods and the containers kept (default 20000 each; a node runs at
	// most a few hundred pods, so the cap only bounds memory on a pathological log directory).
	MaxEntries int
	// Now is the clock (tests).
	Now func() time.Time
}

// Stats are cumulative counters for the exporter's self-metrics.
type Stats struct {
	Refreshes  int   // completed refreshes
	Malformed  int   // directory entries skipped because their name is not a kubelet name
	Truncated  int   // entries dropped by MaxEntries
	ReadErrors int   // failed directory reads (the previous maps are kept)
	LastError  error // the last read error, nil after a clean refresh
	Pods       int   // pods in the current map
	Containers int   // containers in the current map
}

// Resolver maps pod UIDs and container ids to names. It is safe for concurrent use.
type Resolver struct {
	root string
	opt  Options

	mu         sync.Mutex
	pods       map[string]Pod       // pod UID (dashed, lower case) -> names
	containers map[string]Container // container id (bare hex) -> names
	cut        map[string][]cutLink // pod UID -> its containers whose link name the kubelet cut
	last       time.Time            // last refresh attempt
	stats      Stats
	// linking: the last listing of the containers directory found links (the kubelet links
	// containers where this resolver looks).
	linking bool
}

// New returns a resolver over podLogs (the host's /var/log). Nothing is read until the first lookup.
func New(podLogs string, opt Options) *Resolver {
	if opt.Interval <= 0 {
		opt.Interval = 30 * time.Second
	}
	if opt.MissInterval <= 0 {
		opt.MissInterval = DefaultMissInterval
	}
	if opt.MaxEntries <= 0 {
		opt.MaxEntries = 20000
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Resolver{root: podLogs, opt: opt}
}

// Pod names the pod with this UID. The UID may be dashed (as in the cgroupfs driver's
// pod<uid> and kube_pod_info) or use underscores (the systemd driver's kubepods-pod<uid>.slice).
func (r *Resolver) Pod(uid string) (Pod, bool) {
	uid = NormalizeUID(uid)
	if uid == "" {
		return Pod{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshLocked(false)
	p, ok := r.pods[uid]
	if !ok && r.refreshLocked(true) {
		p, ok = r.pods[uid]
	}
	return p, ok
}

// Container names the container with this id, bare (64 hex) or runtime-prefixed
// (containerd://, cri-o://, docker://, as the exporter's container_id label), in the pod
// with this UID ("" if unknown): a link whose name the kubelet cut names the container when
// it belongs to that pod, what is left of its id is a prefix of id, and every such link of
// the pod that matches names the same container.
func (r *Resolver) Container(id, podUID string) (Container, bool) {
	id = NormalizeContainerID(id)
	if id == "" {
		return Container{}, false
	}
	podUID = NormalizeUID(podUID)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshLocked(false)
	c, ok := r.container(id, podUID)
	if !ok && r.refreshLocked(true) {
		c, ok = r.container(id, podUID)
	}
	return c, ok
}

func (r *Resolver) container(id, podUID string) (Container, bool) {
	if c, ok := r.containers[id]; ok {
		return c, true
	}
	var found Container
	n := 0
	for _, l := range r.cut[podUID] {
		if strings.HasPrefix(id, l.idPrefix) {
			if n > 0 && l.c != found {
				return Container{}, false // the cut ids do not tell these containers apart
			}
			found, n = l.c, n+1
		}
	}
	return found, n > 0
}

// cutLink is a containers/ link whose name the kubelet cut.
type cutLink struct {
	idPrefix string // what the cut left of the container id (lower case; may be empty)
	c        Container
}

// Stats returns the counters.
func (r *Resolver) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Pods, s.Containers = len(r.pods), len(r.containers)
	return s
}

// refreshLocked refreshes when the interval (or, after a miss, the miss interval) has passed.
func (r *Resolver) refreshLocked(miss bool) bool {
	every := r.opt.Interval
	if miss {
		every = r.opt.MissInterval
	}
	if !r.last.IsZero() && r.opt.Now().Sub(r.last) < every {
		return false
	}
	r.refresh()
	return true
}

func (r *Resolver) refresh() {
	r.last = r.opt.Now()
	r.stats.LastError = nil
	pods := map[string]Pod{}
	perr := r.list(filepath.Join(r.root, "pods"), func(name string) bool {
		uid, p, ok := ParsePodDir(name)
		if ok {
			pods[uid] = p
		}
		return ok
	}, func() int { return len(pods) })
	containers := map[string]Container{}
	cut := map[string][]cutLink{}
	ncut := 0
	cdir := filepath.Join(r.root, "containers")
	cerr := r.list(cdir, func(name string) bool {
		id, c, ok := ParseContainerLog(name)
		if ok {
			containers[id] = c
			return true
		}
		if len(name) != MaxLinkName {
			return false
		}
		// os.Readlink reads the link itself: nothing is followed.
		target, err := os.Readlink(filepath.Join(cdir, name))
		if err != nil {
			return false
		}
		uid, prefix, c, ok := ParseCutLink(name, target)
		if ok {
			cut[uid] = append(cut[uid], cutLink{idPrefix: prefix, c: c})
			ncut++
		}
		return ok
	}, func() int { return len(containers) + ncut })
	// A directory that cannot be read keeps the previous map: names do not flap on a transient error.
	if perr == nil {
		r.pods = pods
	}
	if cerr == nil {
		r.containers, r.cut = containers, cut
		r.linking = len(containers)+ncut > 0
	}
	r.stats.Refreshes++
}

// list reads the names in dir in batches, handing each to add, and stops at MaxEntries.
// A missing directory is an empty one (a node without pods, or a host that is not a node).
func (r *Resolver) list(dir string, add func(string) bool, size func() int) error {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		r.readError(err)
		return err
	}
	defer f.Close()
	for {
		// Readdirnames uses getdents only: no stat, no open of the entries, no symlink followed.
		names, err := f.Readdirnames(256)
		for _, n := range names {
			if size() >= r.opt.MaxEntries {
				r.stats.Truncated++
				continue
			}
			if !add(n) {
				r.stats.Malformed++
			}
		}
		if err == io.EOF || (err == nil && len(names) == 0) {
			return nil
		}
		if err != nil {
			r.readError(err)
			return err
		}
	}
}

// Linking tells whether the kubelet links containers where the resolver looks: the last
// listing of the containers directory found links. Without them (the directory not mounted)
// no container will ever be named by its link.
func (r *Resolver) Linking() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.linking
}

func (r *Resolver) readError(err error) {
	r.stats.ReadErrors++
	r.stats.LastError = err
}

// ParsePodDir splits a pods/ entry "<namespace>_<pod>_<uid>" into the normalized UID and names.
func ParsePodDir(name string) (uid string, p Pod, ok bool) {
	parts := strings.Split(name, "_")
	if len(parts) != 3 || !isDNSLabel(parts[0]) || !isDNSSubdomain(parts[1]) || !isUID(parts[2]) {
		return "", Pod{}, false
	}
	return NormalizeUID(parts[2]), Pod{Namespace: parts[0], Name: parts[1]}, true
}

// ParseContainerLog splits a containers/ entry "<pod>_<namespace>_<container>-<id>.log".
func ParseContainerLog(name string) (id string, c Container, ok bool) {
	base, found := strings.CutSuffix(name, ".log")
	if !found {
		return "", Container{}, false
	}
	parts := strings.Split(base, "_")
	if len(parts) != 3 {
		return "", Container{}, false
	}
	dash := strings.LastIndexByte(parts[2], '-')
	if dash < 0 {
		return "", Container{}, false
	}
	cname, cid := parts[2][:dash], parts[2][dash+1:]
	if !isDNSSubdomain(parts[0]) || !isDNSLabel(parts[1]) || !isDNSLabel(cname) || !isContainerID(cid) {
		return "", Container{}, false
	}
	return strings.ToLower(cid), Container{Namespace: parts[1], Pod: parts[0], Name: cname}, true
}

// MaxLinkName is the length of a containers/ name the kubelet cut: 251 characters and ".log".
const MaxLinkName = 255

// ParseCutLink names the container of a containers/ link whose name the kubelet cut, from
// its target (<podlogs>/pods/<namespace>_<pod>_<uid>/<container>/<n>.log): it returns the
// pod UID and what the cut left of the container id. The name must be what the kubelet
// writes for those names, cut.
func ParseCutLink(name, target string) (uid, idPrefix string, c Container, ok bool) {
	base, found := strings.CutSuffix(name, ".log")
	parts := strings.Split(target, "/")
	if !found || len(parts) < 4 || parts[len(parts)-4] != "pods" {
		return "", "", Container{}, false
	}
	podDir, ctr, file := parts[len(parts)-3], parts[len(parts)-2], parts[len(parts)-1]
	uid, pod, ok := ParsePodDir(podDir)
	n, isLog := strings.CutSuffix(file, ".log")
	if !ok || !isDNSLabel(ctr) || !isLog || n == "" || strings.Trim(n, "0123456789") != "" {
		return "", "", Container{}, false
	}
	full := pod.Name + "_" + pod.Namespace + "_" + ctr + "-"
	var prefix string
	switch {
	case len(base) >= len(full) && strings.HasPrefix(base, full):
		prefix = strings.ToLower(base[len(full):])
	case len(base) < len(full) && strings.HasPrefix(full, base):
	default:
		return "", "", Container{}, false
	}
	if len(prefix) >= 64 || strings.IndexFunc(prefix, func(c rune) bool { return c > 0x7f || !isHex(byte(c)) }) >= 0 {
		return "", "", Container{}, false
	}
	return uid, prefix, Container{Namespace: pod.Namespace, Pod: pod.Name, Name: ctr}, true
}

// NormalizeUID turns a pod UID into the dashed lower-case form ("" when it is not one).
func NormalizeUID(uid string) string {
	uid = strings.ToLower(strings.ReplaceAll(uid, "_", "-"))
	if !isUID(uid) {
		return ""
	}
	return uid
}

// NormalizeContainerID strips a runtime prefix ("containerd://") ("" when it is not an id).
func NormalizeContainerID(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		id = id[i+3:]
	}
	id = strings.ToLower(id)
	if !isContainerID(id) {
		return ""
	}
	return id
}

// isUID accepts RFC 4122 text and the 32-hex config hash static (mirror) pods use as UID.
func isUID(s string) bool {
	if len(s) != 36 && len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' && len(s) == 36 && (i == 8 || i == 13 || i == 18 || i == 23) {
			continue
		}
		if !isHex(c) {
			return false
		}
	}
	return true
}

// isContainerID accepts the 64-hex ids of containerd, CRI-O and Docker.
func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// isDNSLabel: RFC 1123 label (namespaces, container names).
func isDNSLabel(s string) bool {
	return len(s) <= 63 && isDNSPart(s)
}

// isDNSSubdomain: a Kubernetes DNS-1123 subdomain (pod names): at most 253 characters,
// dot-separated parts that are labels but for their length, which Kubernetes does not bound
// (apimachinery's IsDNS1123Subdomain): a pod name of 200 characters without a dot is valid.
func isDNSSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !isDNSPart(l) {
			return false
		}
	}
	return true
}

// isDNSPart: lower-case letters, digits and '-', not at either end.
func isDNSPart(s string) bool {
	if len(s) == 0 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
