package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The host node's CNI bridge, which the pods' veths join; Subnet its pod network (host side .1).
const (
	Bridge  = "qekn0"
	Subnet  = "10.253.77.0/24"
	NodeIP  = "10.253.77.1" // the bridge's address: the node's InternalIP (a kubelet refuses a loopback one)
	nodeNet = NodeIP + "/24"
)

// hostKind names the host node's run directories and lock.
const hostKind = "host"

// HostOptions configure a node on this host.
type HostOptions struct {
	Bin        string // directory holding kubelet, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
	Name       string // node name; default "quota-kubenode"
	PauseImage Image  // the sandbox image
	Images     []Image
	Archives   []string // docker-archive or OCI tarballs (make image's)
	Logf       func(format string, args ...any)
}

// HostNode is a kubelet, containerd and runc on this host's cgroup v1 hierarchy (cgroupfs
// driver), in a private mount namespace held by unshare --propagation shared: their mounts
// (image root filesystems, volumes, network namespaces) never reach the host and vanish with
// it, and "/" is shared inside it, as on a systemd host, which mountPropagation needs.
type HostNode struct {
	name   string
	dir    string
	socket string
	holder *proc
	ps     *procSet
}

func (n *HostNode) Name() string   { return n.name }
func (n *HostNode) Layout() Layout { return layoutV1 }

// ManifestDir is the kubelet's staticPodPath.
func (n *HostNode) ManifestDir() string { return filepath.Join(n.dir, "manifests") }

func (n *HostNode) AddStaticPod(_ context.Context, file string, manifest []byte) error {
	return os.WriteFile(filepath.Join(n.ManifestDir(), file), manifest, 0o644)
}

// Exec runs a command on this host, outside the node's mount namespace (cgroups, ctr).
func (n *HostNode) Exec(ctx context.Context, argv ...string) (string, error) {
	return run(ctx, 2*time.Minute, nil, argv[0], argv[1:]...)
}

// Ctr runs ctr against the node's containerd in the k8s.io namespace.
func (n *HostNode) Ctr(ctx context.Context, args ...string) (string, error) {
	return run(ctx, 2*time.Minute, nil, "ctr", append([]string{"--address", n.socket, "--namespace", "k8s.io"}, args...)...)
}

func (n *HostNode) SandboxIDs(ctx context.Context) ([]string, error) {
	out, err := n.Ctr(ctx, "containers", "ls", "-q", sandboxFilter)
	return sandboxIDs(out), err
}

func (n *HostNode) LogTail(component string) string { return n.ps.logTail(component) }

// StartHost brings up a control plane on loopback and a node on this host, and waits until the
// node is Ready; on error what was started is stopped.
func StartHost(ctx context.Context, o HostOptions) (_ *Cluster, err error) {
	if o.Name == "" {
		o.Name = "quota-kubenode"
	}
	dir, lock, err := claim(hostKind)
	if err != nil {
		return nil, err
	}
	ps := &procSet{dir: dir, logf: o.Logf}
	n := &HostNode{name: o.Name, dir: dir, ps: ps}
	c := &Cluster{Node: n}
	c.stop = func() { n.stop(c.ControlPlane); lock.Close() }
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	CleanStale(o.Logf)
	for _, cg := range []string{"cpu", "memory"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", cg, "kubepods")); err == nil {
			return nil, fmt.Errorf("/sys/fs/cgroup/%s/kubepods exists and no earlier run of this harness claims it: another kubelet runs here", cg)
		}
	}
	for _, d := range []string{"manifests", "cni/net.d", "cni/ipam", "containerd/root", "containerd/state", "kubelet"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if c.ControlPlane, err = startControlPlane(ctx, dir, o.Bin, "127.0.0.1", ps); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubelet.kubeconfig")
	if err := c.nodeCredentials(n.name, NodeIP, kubeconfig); err != nil {
		return nil, err
	}

	// The mount namespace holder, then containerd in it.
	if n.holder, err = ps.start("mntns", "unshare", "--mount", "--propagation", "shared", "--", "sleep", "infinity"); err != nil {
		return nil, err
	}
	time.Sleep(100 * time.Millisecond) // unshare execs sleep in the new namespace
	n.socket = filepath.Join(dir, "containerd", "containerd.sock")
	cfg := filepath.Join(dir, "containerd", "config.toml")
	ctrdCfg := containerdConfig{
		Root: filepath.Join(dir, "containerd", "root"), State: filepath.Join(dir, "containerd", "state"), Socket: n.socket,
		Pause: o.PauseImage.FullRef(), CNIConfDir: filepath.Join(dir, "cni", "net.d"), RestrictOOMScoreAdj: true,
	}
	if err := os.WriteFile(cfg, []byte(ctrdCfg.toml()), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "cni", "net.d", "10-kubenode.conflist"), []byte(cniConfig(Bridge, Subnet, filepath.Join(dir, "cni", "ipam"))), 0o644); err != nil {
		return nil, err
	}
	ctrd, err := ps.start("containerd", "nsenter", "--mount=/proc/"+strconv.Itoa(n.holder.Pid())+"/ns/mnt", "--", "containerd", "--config", cfg)
	if err != nil {
		return nil, err
	}
	if err := n.waitFile(ctx, ctrd, n.socket, time.Minute); err != nil {
		return nil, err
	}
	for _, im := range append([]Image{o.PauseImage}, o.Images...) {
		f := filepath.Join(dir, imageFileName(im))
		if err := im.WriteDockerArchive(f); err != nil {
			return nil, err
		}
		err := n.importArchive(ctx, f)
		os.Remove(f)
		if err != nil {
			return nil, err
		}
	}
	for _, f := range o.Archives {
		if err := n.importArchive(ctx, f); err != nil {
			return nil, err
		}
	}

	// The bridge before the kubelet: its address is the node's (the CNI plugin reuses it).
	for _, args := range [][]string{
		{"link", "add", Bridge, "type", "bridge"},
		{"addr", "add", nodeNet, "dev", Bridge},
		{"link", "set", Bridge, "up"},
	} {
		if _, err := run(ctx, 30*time.Second, nil, "ip", args...); err != nil {
			return nil, err
		}
	}

	// The kubelet, registered to the API server.
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	kcfg := filepath.Join(dir, "kubelet", "config.yaml")
	p := c.pki
	kc := kubeletConfig{Driver: "cgroupfs", Runtime: n.socket, StaticPodPath: n.ManifestDir(), Address: NodeIP, Port: ports[0],
		TLSCert: p.path("kubelet-serving-"+n.name, "crt"), TLSKey: p.path("kubelet-serving-"+n.name, "key"), ClientCA: p.path("ca", "crt")}
	if err := os.WriteFile(kcfg, []byte(kc.yaml()), 0o644); err != nil {
		return nil, err
	}
	if _, err := ps.start("kubelet", "nsenter", "--mount=/proc/"+strconv.Itoa(n.holder.Pid())+"/ns/mnt", "--",
		filepath.Join(o.Bin, "kubelet"), "--config="+kcfg, "--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(dir, "kubelet", "root"), "--hostname-override="+n.name, "--node-ip="+NodeIP, "--v=2"); err != nil {
		return nil, err
	}
	if err := c.waitNodeReady(ctx, n.name, 3*time.Minute, ps.exited); err != nil {
		return nil, fmt.Errorf("%w: %s", err, ps.logTail("kubelet"))
	}
	ps.logf("node %s Ready (%s)", n.name, dir)
	return c, nil
}

func imageFileName(im Image) string {
	return strings.NewReplacer("/", "_", ":", "_").Replace(im.Ref) + ".tar"
}

// importArchive imports a docker-archive or OCI tarball.
func (n *HostNode) importArchive(ctx context.Context, file string) error {
	_, err := run(ctx, 5*time.Minute, nil, "nsenter", "--mount=/proc/"+strconv.Itoa(n.holder.Pid())+"/ns/mnt", "--",
		"ctr", "--address", n.socket, "--namespace", "k8s.io", "images", "import", "--no-unpack=false", file)
	return err
}

// stop removes the pods (the kubelet stops their containers and sandboxes), stops every
// component and removes the cgroups, pod logs, bridge and state directory of the run.
func (n *HostNode) stop(cp *ControlPlane) {
	ctx := context.Background()
	if cp != nil && n.kubeletRunning() {
		// Static pods go with their manifests; API pods with the objects.
		files, _ := filepath.Glob(filepath.Join(n.ManifestDir(), "*"))
		for _, f := range files {
			os.Remove(f)
		}
		_, _ = cp.Kubectl(ctx, "delete", "daemonsets,deployments", "--all", "--all-namespaces", "--wait=false")
		_, _ = cp.Kubectl(ctx, "delete", "pods", "--all", "--all-namespaces", "--grace-period=1", "--wait=false")
		deadline := time.Now().Add(45 * time.Second)
		for time.Now().Before(deadline) {
			out, err := n.Ctr(ctx, "tasks", "ls", "-q")
			if err == nil && strings.TrimSpace(out) == "" {
				break
			}
			time.Sleep(time.Second)
		}
	}
	n.ps.stop(func(p *proc) {
		if p.Name == "containerd" {
			n.removeContainers(ctx)
		}
	})
	if n.socket != "" {
		killByArg(n.socket) // shims whose containers could not be deleted
	}
	cleanupHost(n.dir, n.ps.logf)
}

func (n *HostNode) kubeletRunning() bool {
	for _, p := range n.ps.procs {
		if p.Name == "kubelet" {
			return !p.Exited()
		}
	}
	return false
}

// removeContainers kills and deletes every container containerd still has (after a failed
// or interrupted pod deletion), so that the shims exit.
func (n *HostNode) removeContainers(ctx context.Context) {
	out, err := n.Ctr(ctx, "containers", "ls", "-q")
	if err != nil {
		return
	}
	for _, id := range strings.Fields(out) {
		_, _ = n.Ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
	}
	for _, id := range strings.Fields(out) {
		_, _ = n.Ctr(ctx, "tasks", "delete", "--force", id)
		_, _ = n.Ctr(ctx, "containers", "delete", id)
	}
}

func (n *HostNode) waitFile(ctx context.Context, p *proc, file string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("%s exited: %s", p.Name, n.ps.logTail(p.Name))
		}
		if _, err := os.Stat(file); err == nil {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s: no %s within %s: %s", p.Name, file, limit, n.ps.logTail(p.Name))
}

// CleanStale removes what host-node runs of this harness whose test process is gone left
// behind: their processes (pid files, shims by socket), cgroups, pod logs, bridge and
// directories. Called with the lock held.
func CleanStale(logf func(string, ...any)) {
	for _, d := range staleRuns(hostKind) {
		if logf != nil {
			logf("removing the leftovers of an earlier run: %s", d)
		}
		killRecorded(d)
		killByArg(filepath.Join(d, "containerd", "containerd.sock"))
		cleanupHost(d, logf)
	}
}

// cleanupHost removes a run's host state once its processes are gone: the kubepods cgroups
// (after killing what still runs in them), the kubelet's log entries of the run's pods, the
// bridge and the run directory. Mounts need nothing: they lived in the run's mount namespace.
func cleanupHost(dir string, logf func(string, ...any)) {
	removeCgroupTree("kubepods")
	removePodLogs(dir)
	if _, err := net.InterfaceByName(Bridge); err == nil {
		if out, err := exec.Command("ip", "link", "delete", Bridge).CombinedOutput(); err != nil && logf != nil {
			logf("ip link delete %s: %v: %s", Bridge, err, out)
		}
	}
	if err := os.RemoveAll(dir); err != nil && logf != nil {
		logf("removing %s: %v", dir, err)
	}
}

// removeCgroupTree kills the processes left in /<name> of every v1 hierarchy (and the
// unified one) and removes its directories bottom-up.
func removeCgroupTree(name string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + name)
	for round := 0; round < 50 && len(roots) > 0; round++ {
		var left []string
		for _, root := range roots {
			var dirs []string
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if b, err := os.ReadFile(filepath.Join(dirs[i], "cgroup.procs")); err == nil {
					for _, f := range strings.Fields(string(b)) {
						if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
							_ = syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
				os.Remove(dirs[i])
			}
			if _, err := os.Stat(root); err == nil {
				left = append(left, root)
			}
		}
		roots = left
		if len(roots) > 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// removePodLogs removes /var/log/pods/<ns>_<pod>_<uid> of the pods this run's kubelet made
// (the UIDs recorded in its root dir's pods/) and the /var/log/containers links into them.
func removePodLogs(dir string) {
	uids := map[string]bool{}
	entries, _ := os.ReadDir(filepath.Join(dir, "kubelet", "root", "pods"))
	for _, e := range entries {
		uids[e.Name()] = true
	}
	pods, _ := os.ReadDir("/var/log/pods")
	for _, e := range pods {
		parts := strings.Split(e.Name(), "_")
		if len(parts) == 3 && uids[parts[2]] {
			os.RemoveAll(filepath.Join("/var/log/pods", e.Name()))
		}
	}
	links, _ := os.ReadDir("/var/log/containers")
	for _, e := range links {
		p := filepath.Join("/var/log/containers", e.Name())
		if t, err := os.Readlink(p); err == nil && strings.HasPrefix(t, "/var/log/pods/") {
			if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
				os.Remove(p) // dangling: its pod directory is gone
			}
		}
	}
}
