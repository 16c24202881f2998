//go:build linux

package cgroupid

import (
	"strconv"
	"strings"
)

// Identity is what a cgroup path says about the workload in it. Empty fields are unknown.
type Identity struct {
	PodUID      string // Kubernetes pod UID with dashes, as kube_pod_info's uid label
	ContainerID string // runtime-prefixed like kube-state-metrics: containerd://<id>, cri-o://<id>, docker://<id>
	QoSClass    string // guaranteed, burstable, besteffort
}

// Runtime prefixes written by kube-state-metrics.
const (
	RuntimeContainerd = "containerd"
	RuntimeCRIO       = "cri-o"
	RuntimeDocker     = "docker"
)

// Kind is what a cgroup is to the kubelet and the container runtimes.
type Kind uint8

const (
	// KindOther: none of the below (a systemd unit, a slice, kubepods and its QoS slices, ...).
	KindOther Kind = iota
	// KindPod: a Kubernetes pod's cgroup (the pod slice, /kubepods/<qos>/pod<uid>).
	KindPod
	// KindContainer: a container's cgroup, a Kubernetes pod's (its sandbox included, which
	// only the kubelet's names tell apart) or a Docker container's.
	KindContainer
	// KindSandbox: a pod's sandbox that the path alone names: CRI-O's cgroup for a dropped
	// infra container (crio-<id> without .scope in a systemd pod slice).
	KindSandbox
	// KindConmon: CRI-O's container monitor (crio-conmon-<id>), never exported.
	KindConmon
	// KindBelowContainer: a cgroup below a container's: the container's own (its processes
	// are the container's), never exported on its own.
	KindBelowContainer
)

// Place is where a cgroup sits in the kubelet's and the runtimes' layout.
type Place struct {
	Kind Kind
	// Container is the path of the container cgroup a KindBelowContainer cgroup is below.
	Container string
	// RuntimeSubgroup: a KindBelowContainer cgroup that the runtime itself makes, crun's
	// "container" subgroup of a systemd scope (crun.1, run.oci.systemd.subgroup), not a tenant's.
	RuntimeSubgroup bool
}

// CrunSubgroup is the subgroup crun (CRI-O's default runtime) makes below a container's systemd
// scope on cgroup v2 and moves the container's processes into.
const CrunSubgroup = "container"

// Locate derives the identity of a cgroup and its place from its path, as the kubelet and
// the runtimes lay paths out:
//
//   - the kubelet's root below any cgroupRoot: cgroupfs driver "kubepods" (/kubelet/kubepods
//     in kind), systemd driver a slice whose last dash-separated component is "kubepods"
//     (kubepods.slice, kind's kubelet-kubepods.slice): the kubelet's ParseSystemdToCgroupName,
//     '-' separating levels and '_' standing for '-' in the UID;
//   - then an optional QoS level and the pod (pod<uid>, <parent>-pod<uid>.slice);
//   - then the container, directly in the pod: cri-containerd-<id>.scope, crio-<id>.scope,
//     docker-<id>.scope, crio-<id> or a bare 64-hex id (cgroupfs driver: bareRuntime says
//     whose); crio-conmon-<id> is CRI-O's monitor;
//   - off Kubernetes, Docker's /docker/<id> and docker-<id>.scope.
//
// The first pod and the first container on the path decide: anything below a container is
// that container's (KindBelowContainer), whatever its own name says, so a tenant that can make
// cgroups inside its container cannot take another pod's identity. systemd escapes (\x2d) are
// undone first.
func Locate(path, bareRuntime string) (Identity, Place) {
	p := parser{bare: bareRuntime}
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, raw := range segs {
		if raw == "" {
			break
		}
		if p.step(unescapeSystemd(raw)) {
			if p.place.Kind == KindBelowContainer {
				p.place.Container = "/" + strings.Join(segs[:i], "/")
				p.place.RuntimeSubgroup = raw == CrunSubgroup && p.scope && i == len(segs)-1
			}
			break
		}
	}
	if p.id.QoSClass == "" && p.id.PodUID != "" {
		p.id.QoSClass = "guaranteed" // a pod directly under kubepods
	}
	return p.id, p.place
}

// parser states along a path.
const (
	beforeKubepods = iota // looking for the kubelet's root or a Docker container
	inKubepods            // below the kubelet's root: QoS level or pod
	inPod                 // below a pod: the container
	done                  // a container was found: anything below is its own
)

type parser struct {
	bare  string
	state int
	// slice is the systemd name of the level parsed last, without ".slice" ("kubepods",
	// "kubelet-kubepods-burstable"); systemd: the kubelet uses its systemd driver.
	slice    string
	systemd  bool
	scope    bool // the container is a systemd scope (crun's subgroup lives in one)
	afterDoc bool // the previous segment was "docker"
	id       Identity
	place    Place
}

// step consumes one path segment; it returns true when the rest of the path is decided.
func (p *parser) step(seg string) bool {
	switch p.state {
	case beforeKubepods:
		if isConmon(seg) {
			p.place.Kind = KindConmon
			return true
		}
		// Off Kubernetes: a runtime-prefixed container anywhere, a bare id below /docker.
		if c, scope := containerSegment(seg, dockerRuntime(p.afterDoc)); c != "" {
			p.id.ContainerID = c
			p.place.Kind = KindContainer
			p.scope = scope
			p.state = done
			return false
		}
		p.afterDoc = seg == "docker"
		if seg == "kubepods" {
			p.state = inKubepods
			return false
		}
		if comps, ok := systemdSlice(seg); ok && comps[len(comps)-1] == "kubepods" {
			p.state, p.systemd, p.slice = inKubepods, true, strings.TrimSuffix(seg, ".slice")
		}
		return false
	case inKubepods:
		return p.podLevel(seg)
	case inPod:
		return p.containerLevel(seg)
	default: // below a container
		p.place = Place{Kind: KindBelowContainer}
		return true
	}
}

// podLevel parses a segment below the kubelet's root: a QoS level or a pod.
func (p *parser) podLevel(seg string) bool {
	var name string
	if p.systemd {
		rest, ok := strings.CutPrefix(seg, p.slice+"-")
		if !ok || !strings.HasSuffix(rest, ".slice") || strings.Contains(strings.TrimSuffix(rest, ".slice"), "-") {
			return p.unknown()
		}
		name = strings.ReplaceAll(strings.TrimSuffix(rest, ".slice"), "_", "-")
		p.slice = strings.TrimSuffix(seg, ".slice")
	} else {
		name = seg
	}
	switch {
	case (name == "burstable" || name == "besteffort") && p.id.QoSClass == "":
		p.id.QoSClass = name
		return false
	case strings.HasPrefix(name, "pod") && looksLikeUID(name[3:]):
		p.id.PodUID = strings.ReplaceAll(name[3:], "_", "-")
		p.place.Kind = KindPod
		p.state = inPod
		return false
	}
	return p.unknown()
}

// containerLevel parses the segment directly below a pod.
func (p *parser) containerLevel(seg string) bool {
	if isConmon(seg) {
		p.place.Kind = KindConmon
		return true
	}
	c, scope := containerSegment(seg, p.bare)
	if c == "" {
		return p.unknown()
	}
	p.id.ContainerID = c
	p.place.Kind = KindContainer
	// CRI-O's cgroup for a dropped infra container is plain cgroupfs in the systemd pod slice:
	// crio-<sandbox id> without .scope (cri-o internal/config/cgmgr, CreateSandboxCgroup).
	if p.systemd && !scope && strings.HasPrefix(seg, "crio-") {
		p.place.Kind = KindSandbox
	}
	p.scope = scope
	p.state = done
	return false
}

// unknown ends the parse at a segment the kubelet's layout does not have there: the cgroup
// and everything below it keep what the path said so far, as KindOther.
func (p *parser) unknown() bool {
	p.place = Place{Kind: KindOther}
	p.id.ContainerID = ""
	return true
}

func dockerRuntime(afterDockerDir bool) string {
	if afterDockerDir { // plain Docker: /docker/<id>
		return RuntimeDocker
	}
	return ""
}

// systemdSlice splits a slice name the kubelet's way (ParseSystemdToCgroupName): the
// components of "a-b-c.slice" are a, b, c.
func systemdSlice(seg string) ([]string, bool) {
	name, ok := strings.CutSuffix(seg, ".slice")
	if !ok || name == "" {
		return nil, false
	}
	return strings.Split(name, "-"), true
}

func isConmon(seg string) bool { return strings.HasPrefix(seg, "crio-conmon-") }

// containerSegment recognises one path segment as a container's cgroup and says whether it
// is a systemd scope. A bare 64-hex segment counts only when bareRuntime says whose it is.
func containerSegment(seg, bareRuntime string) (id string, scope bool) {
	for _, p := range []struct{ prefix, runtime string }{
		{"cri-containerd-", RuntimeContainerd},
		{"crio-", RuntimeCRIO},
		{"docker-", RuntimeDocker},
	} {
		rest, ok := strings.CutPrefix(seg, p.prefix)
		if !ok {
			continue
		}
		rest, scope = strings.CutSuffix(rest, ".scope")
		if isHex64(rest) {
			return p.runtime + "://" + rest, scope
		}
		return "", false
	}
	if isHex64(seg) && bareRuntime != "" {
		return bareRuntime + "://" + seg, false
	}
	return "", false
}

func isHex64(s string) bool { return len(s) == 64 && isHex(s) }

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// looksLikeUID accepts Kubernetes pod UIDs (RFC 4122 text, or the underscore form systemd
// uses) and a static pod's UID: the kubelet's 32-hex hash of its manifest, without dashes
// (seen on a real kubelet, test/kubenode: /kubepods/burstable/pod<32 hex>/...).
func looksLikeUID(s string) bool {
	if len(s) == 32 {
		return isHex(s)
	}
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// unescapeSystemd undoes systemd's unit-name escaping (\x2d for '-', etc.).
func unescapeSystemd(s string) string {
	if !strings.Contains(s, `\x`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
