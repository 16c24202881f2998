// Package node brings up real single-node Kubernetes clusters for tests: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler on this host (ControlPlane), and one node, a
// kubelet with containerd, registered to it. Two kinds of node:
//
//   - StartHost: the kubelet on this host's cgroup v1 hierarchy with the cgroupfs driver,
//     containerd 1.6 and runc, pods on a host-local CNI bridge (host.go);
//   - StartVM: a qemu VM with Debian's cloud kernel (cgroup v2), systemd as PID 1, containerd
//     with runc's and crun's systemd drivers and the kubelet with the systemd driver, joined to
//     this host by a tap link; the control plane stays on the host (vm.go, vmroot.go).
//
// The assertions of test/kubenode run against either through Node and Layout. Everything a run
// makes lives in its own directory under Base; Stop tears it down, and the next run removes
// what a crashed one left.
package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Base holds one directory per run (<kind>-<pid>) and one lock per kind of node.
const Base = "/var/lib/quota_exporter-kubenode"

// Node is a kubelet with its container runtime, registered to a ControlPlane.
type Node interface {
	Name() string
	Layout() Layout
	// AddStaticPod writes a manifest into the kubelet's staticPodPath.
	AddStaticPod(ctx context.Context, file string, manifest []byte) error
	// Exec runs a command on the node (this host, or inside the VM) and returns its output.
	Exec(ctx context.Context, argv ...string) (string, error)
	// SandboxIDs are the ids of the pod sandboxes the runtime runs a process for: containerd's
	// (label io.cri-containerd.kind=sandbox), CRI-O's infra containers.
	SandboxIDs(ctx context.Context) ([]string, error)
	// LogTail is the end of a component's log (kubelet, containerd, console, ...).
	LogTail(component string) string
}

// Layout is what the assertions need to know about a node's cgroups.
type Layout struct {
	Name     string // v1-cgroupfs, v2-systemd, v2-kind
	V2       bool
	Kubepods string // the kubelet's pod cgroup root as the exporter's cgroup label shows it
	CPURoot  string // the cpu controller's hierarchy on the node
	Driver   string // the kubelet's and runtime's cgroup driver
	// CRIO: CRI-O runs the containers (ids cri-o://<id>, scopes crio-<id>.scope, crun by
	// default), not containerd (containerd://<id>, cri-containerd-<id>.scope, runc by default).
	CRIO bool
}

// IDPrefix is the runtime's prefix of a container id in the API (containerStatuses) and in
// the exporter's container_id label.
func (l Layout) IDPrefix() string {
	if l.CRIO {
		return "cri-o://"
	}
	return "containerd://"
}

// Scope is the systemd scope a container of id runs in.
func (l Layout) Scope(id string) string {
	if l.CRIO {
		return "crio-" + id + ".scope"
	}
	return "cri-containerd-" + id + ".scope"
}

// BareID is a container id of the API (<runtime>://<id>) without its runtime.
func BareID(id string) string {
	if _, bare, ok := strings.Cut(id, "://"); ok {
		return bare
	}
	return id
}

var (
	layoutV1 = Layout{Name: "v1-cgroupfs", Kubepods: "/kubepods", CPURoot: "/sys/fs/cgroup/cpu", Driver: "cgroupfs"}
	// The kubelet's systemd driver names /kubepods kubepods.slice; with kind's cgroupRoot
	// /kubelet every name below it carries the root's prefix (ToSystemd, ExpandSlice).
	layoutV2   = Layout{Name: "v2-systemd", V2: true, Kubepods: "/kubepods.slice", CPURoot: "/sys/fs/cgroup", Driver: "systemd"}
	layoutKind = Layout{Name: "v2-kind", V2: true, Kubepods: "/kubelet.slice/kubelet-kubepods.slice", CPURoot: "/sys/fs/cgroup", Driver: "systemd"}
	layoutCRIO = Layout{Name: "v2-crio", V2: true, Kubepods: "/kubepods.slice", CPURoot: "/sys/fs/cgroup", Driver: "systemd", CRIO: true}
)

// Cluster is a control plane and its node.
type Cluster struct {
	*ControlPlane
	Node Node
	stop func()
	vm   *VMOptions // a VM cluster's, for RestartVM
}

// Stop tears the cluster down (idempotent).
func (c *Cluster) Stop() {
	if c.stop != nil {
		c.stop()
		c.stop = nil
	}
}

// LogPath is the log of a host-side component (etcd, kube-apiserver, ...).
func (c *Cluster) LogPath(name string) string { return c.ps.LogPath(name) }

// claim makes Base/<kind>-<pid> and takes Base/<kind>.lock: one run of a kind per host at a
// time (it owns cgroups, /var/log/pods entries, a bridge or a tap device).
func claim(kind string) (dir string, lock *os.File, err error) {
	if err := os.MkdirAll(Base, 0o755); err != nil {
		return "", nil, err
	}
	lockPath := filepath.Join(Base, kind+".lock")
	if lock, err = os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644); err != nil {
		return "", nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return "", nil, fmt.Errorf("another kubenode run holds %s: %w", lockPath, err)
	}
	return filepath.Join(Base, fmt.Sprintf("%s-%d", kind, os.Getpid())), lock, nil
}

// staleRuns are the run directories of a kind whose test process is not this one. Called
// with the kind's lock held, so their runs have ended.
func staleRuns(kind string) []string {
	dirs, _ := filepath.Glob(filepath.Join(Base, kind+"-*"))
	var out []string
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), kind+"-"))
		if err == nil && pid == os.Getpid() {
			continue
		}
		out = append(out, d)
	}
	return out
}

func freePorts(k int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < k; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// sandboxIDs parses `ctr containers ls -q` filtered on the CRI plugin's sandbox label.
func sandboxIDs(out string) []string { return strings.Fields(out) }

// sandboxFilter is ctr's filter for the CRI plugin's pod sandboxes.
const sandboxFilter = `labels."io.cri-containerd.kind"==sandbox`
