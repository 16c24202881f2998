//go:build linux

package cgroupfs

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

// ParseIdentity derives the identity from a cgroup path. It knows the Kubernetes systemd and
// cgroupfs drivers (kubepods.slice/..., /kubepods/...), containerd, CRI-O and Docker leaves,
// and systemd escapes (\x2d). A bare 64-hex container directory (cgroupfs driver) does not say
// which runtime made it: bareRuntime names it (containerd by default).
func ParseIdentity(path, bareRuntime string) Identity {
	var id Identity
	segs := strings.Split(strings.Trim(path, "/"), "/")
	inKubepods := false
	for i, raw := range segs {
		seg := unescapeSystemd(raw)
		switch {
		case seg == "kubepods" || seg == "kubepods.slice":
			inKubepods = true
			continue
		case !inKubepods:
		case seg == "burstable" || seg == "besteffort":
			id.QoSClass = seg
			continue
		case strings.HasPrefix(seg, "kubepods-") && strings.HasSuffix(seg, ".slice"):
			// kubepods-burstable.slice, kubepods-burstable-pod<uid>.slice, kubepods-pod<uid>.slice
			name := strings.TrimSuffix(strings.TrimPrefix(seg, "kubepods-"), ".slice")
			for _, q := range []string{"burstable", "besteffort"} {
				if name == q {
					id.QoSClass = q
				}
				name = strings.TrimPrefix(name, q+"-")
			}
			if uid, ok := strings.CutPrefix(name, "pod"); ok && uid != "" {
				id.PodUID = strings.ReplaceAll(uid, "_", "-")
			}
			continue
		case strings.HasPrefix(seg, "pod") && id.PodUID == "" && looksLikeUID(seg[3:]):
			id.PodUID = seg[3:]
			continue
		}
		runtime := ""
		switch {
		case i > 0 && segs[i-1] == "docker": // plain Docker: /docker/<id>
			runtime = RuntimeDocker
		case inKubepods:
			runtime = bareRuntime
		}
		if c := containerID(seg, runtime); c != "" {
			id.ContainerID = c
		}
	}
	if !inKubepods {
		id.QoSClass = ""
	} else if id.QoSClass == "" && id.PodUID != "" {
		id.QoSClass = "guaranteed" // a pod directly under kubepods
	}
	return id
}

// containerID recognises one path segment as a container's cgroup.
// A bare 64-hex segment counts only when bareRuntime says whose it is.
func containerID(seg, bareRuntime string) string {
	for _, p := range []struct{ prefix, runtime string }{
		{"cri-containerd-", RuntimeContainerd},
		{"crio-", RuntimeCRIO},
		{"docker-", RuntimeDocker},
	} {
		rest, ok := strings.CutPrefix(seg, p.prefix)
		if !ok {
			continue
		}
		rest = strings.TrimSuffix(rest, ".scope")
		if isHex64(rest) {
			return p.runtime + "://" + rest
		}
		// crio-conmon-<id>.scope is the monitor process next to the container, not the container.
		return ""
	}
	if isHex64(seg) && bareRuntime != "" {
		return bareRuntime + "://" + seg
	}
	return ""
}

func isHex64(s string) bool { return len(s) == 64 && isHex(s) }

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
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
