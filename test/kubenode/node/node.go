// Package node brings up a real single-node Kubernetes cluster on this host for tests: etcd,
// kube-apiserver, kube-controller-manager (daemonset, serviceaccount and root-CA controllers),
// kube-scheduler, containerd with runc, and a kubelet registered to the API server with the
// cgroupfs driver on the host's cgroup hierarchy. Pods get IPs on a host-local CNI bridge.
//
// Everything listens on loopback (or that bridge) on free ports. containerd and the kubelet run
// in a private mount namespace (a holder process made by unshare), so the mounts they make
// (image rootfs, volumes, network namespaces) never reach the host's mount table and vanish
// with the namespace; "/" is shared inside it, as on a systemd host, which mountPropagation
// needs. Stop tears the node down; Start first removes what a crashed earlier run left.
package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quota-exporter/quota_exporter/test/internal/runner"
)

// Base holds one directory per run (run-<pid>) and the lock that keeps two runs apart.
const Base = "/var/lib/quota_exporter-kubenode"

// Bridge is the CNI bridge the pods' veths join; Subnet its pod network (host side .1).
const (
	Bridge  = "qekn0"
	Subnet  = "10.253.77.0/24"
	NodeIP  = "10.253.77.1" // the bridge's address: the node's InternalIP (a kubelet refuses a loopback one)
	nodeNet = NodeIP + "/24"
)

// Options configure a node.
type Options struct {
	Bin        string // directory holding kubelet, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
	Name       string // node name; default "quota-kubenode"
	PauseImage Image  // the sandbox image, imported before the kubelet starts
	Logf       func(format string, args ...any)
}

// Node is a running node.
type Node struct {
	opts       Options
	Dir        string
	Name       string
	Kubeconfig string // admin (system:masters)
	APIServer  string // https://127.0.0.1:port
	Socket     string // containerd's socket

	lock    *os.File
	holder  *proc
	procs   []*proc
	stopped bool
}

func (n *Node) logf(format string, args ...any) {
	if n.opts.Logf != nil {
		n.opts.Logf(format, args...)
	}
}

// LogPath is the log of a component (etcd, kube-apiserver, containerd, kubelet, ...).
func (n *Node) LogPath(name string) string { return filepath.Join(n.Dir, "logs", name+".log") }

// Start brings the node up and waits until it is Ready; on error what was started is stopped.
func Start(ctx context.Context, o Options) (_ *Node, err error) {
	if o.Name == "" {
		o.Name = "quota-kubenode"
	}
	n := &Node{opts: o, Name: o.Name, Dir: filepath.Join(Base, fmt.Sprintf("run-%d", os.Getpid()))}
	if err := os.MkdirAll(Base, 0o755); err != nil {
		return nil, err
	}
	// One node per host at a time: it owns the /kubepods cgroups, /var/log/pods entries and the bridge.
	if n.lock, err = os.OpenFile(filepath.Join(Base, "lock"), os.O_CREATE|os.O_RDWR, 0o644); err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(n.lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		n.lock.Close()
		return nil, fmt.Errorf("another kubenode run holds %s: %w", filepath.Join(Base, "lock"), err)
	}
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	CleanStale(n.logf)
	for _, c := range []string{"cpu", "memory"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, "kubepods")); err == nil {
			return nil, fmt.Errorf("/sys/fs/cgroup/%s/kubepods exists and no earlier run of this harness claims it: another kubelet runs here", c)
		}
	}
	for _, d := range []string{"logs", "pids", "pki", "manifests", "cni/net.d", "cni/ipam", "containerd/root", "containerd/state", "etcd", "kubelet"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	bin := func(name string) string { return filepath.Join(o.Bin, name) }

	// Certificates and kubeconfigs.
	p, err := newPKI(filepath.Join(n.Dir, "pki"))
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name, cn string
		orgs     []string
		hosts    []string
	}{
		{"apiserver", "kube-apiserver", nil, []string{"127.0.0.1", "localhost", "kubernetes", "kubernetes.default.svc"}},
		{"admin", "kubenode-admin", []string{"system:masters"}, nil},
		{"kubelet-client", "system:node:" + n.Name, []string{"system:nodes"}, nil},
		{"kubelet-serving", "system:node:" + n.Name, []string{"system:nodes"}, []string{NodeIP, "127.0.0.1", n.Name}},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil},
	} {
		if err := p.issue(c.name, c.cn, c.orgs, c.hosts...); err != nil {
			return nil, err
		}
	}
	if err := p.serviceAccountKey(); err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, kubeletPort, kcmPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	n.APIServer = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	n.Kubeconfig = filepath.Join(n.Dir, "admin.kubeconfig")
	if err := p.kubeconfig(n.Kubeconfig, n.APIServer, "admin"); err != nil {
		return nil, err
	}
	kubeletKubeconfig := filepath.Join(n.Dir, "kubelet.kubeconfig")
	if err := p.kubeconfig(kubeletKubeconfig, n.APIServer, "kubelet-client"); err != nil {
		return nil, err
	}

	// etcd and the API server.
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	etcd, err := n.start("etcd", "etcd", "--name=kubenode", "--data-dir="+filepath.Join(n.Dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-cluster=kubenode=http://127.0.0.1:%d", etcdPeer),
		"--log-level=warn")
	if err != nil {
		return nil, err
	}
	if err := n.waitHTTP(ctx, etcd, etcdURL+"/health", false, time.Minute); err != nil {
		return nil, err
	}
	api, err := n.start("kube-apiserver", bin("kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", apiPort),
		"--tls-cert-file="+p.path("apiserver", "crt"), "--tls-private-key-file="+p.path("apiserver", "key"),
		"--client-ca-file="+p.path("ca", "crt"),
		"--kubelet-client-certificate="+p.path("apiserver-kubelet-client", "crt"),
		"--kubelet-client-key="+p.path("apiserver-kubelet-client", "key"),
		"--kubelet-certificate-authority="+p.path("ca", "crt"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+p.path("sa", "pub"),
		"--service-account-signing-key-file="+p.path("sa", "key"),
		"--service-cluster-ip-range=10.253.78.0/24",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		// A loopback advertise address is not a valid endpoint of the kubernetes Service; no
		// pod here talks to the API server through it.
		"--endpoint-reconciler-type=none",
		"--profiling=false", "--v=1")
	if err != nil {
		return nil, err
	}
	if err := n.waitHTTP(ctx, api, n.APIServer+"/readyz", true, 2*time.Minute); err != nil {
		return nil, err
	}

	// Controllers and scheduler: DaemonSet pods are created by the controller and bound by the
	// scheduler; the kubelet registers its node with the not-ready taint, which the node
	// lifecycle controller removes once the node is Ready.
	kcm, err := n.start("kube-controller-manager", bin("kube-controller-manager"),
		"--kubeconfig="+n.Kubeconfig, "--authentication-kubeconfig="+n.Kubeconfig, "--authorization-kubeconfig="+n.Kubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", kcmPort),
		"--controllers=daemonset,serviceaccount,root-ca-cert-publisher,garbagecollector,namespace,nodelifecycle",
		"--root-ca-file="+p.path("ca", "crt"),
		"--leader-elect=false", "--use-service-account-credentials=false", "--v=1")
	if err != nil {
		return nil, err
	}
	sched, err := n.start("kube-scheduler", bin("kube-scheduler"),
		"--kubeconfig="+n.Kubeconfig, "--authentication-kubeconfig="+n.Kubeconfig, "--authorization-kubeconfig="+n.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false", "--v=1")
	if err != nil {
		return nil, err
	}

	// The mount namespace holder, then containerd in it.
	if n.holder, err = n.start("mntns", "unshare", "--mount", "--propagation", "shared", "--", "sleep", "infinity"); err != nil {
		return nil, err
	}
	time.Sleep(100 * time.Millisecond) // unshare execs sleep in the new namespace
	n.Socket = filepath.Join(n.Dir, "containerd", "containerd.sock")
	cfg := filepath.Join(n.Dir, "containerd", "config.toml")
	if err := os.WriteFile(cfg, []byte(n.containerdConfig(o.PauseImage.FullRef())), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "cni", "net.d", "10-kubenode.conflist"), []byte(n.cniConfig()), 0o644); err != nil {
		return nil, err
	}
	ctrd, err := n.start("containerd", "nsenter", "--mount=/proc/"+strconv.Itoa(n.holder.Pid())+"/ns/mnt", "--",
		"containerd", "--config", cfg)
	if err != nil {
		return nil, err
	}
	if err := n.waitFile(ctx, ctrd, n.Socket, time.Minute); err != nil {
		return nil, err
	}
	if err := n.ImportImage(ctx, o.PauseImage); err != nil {
		return nil, err
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
	kcfg := filepath.Join(n.Dir, "kubelet", "config.yaml")
	if err := os.WriteFile(kcfg, []byte(n.kubeletConfig(p, kubeletPort)), 0o644); err != nil {
		return nil, err
	}
	kubelet, err := n.start("kubelet", "nsenter", "--mount=/proc/"+strconv.Itoa(n.holder.Pid())+"/ns/mnt", "--",
		bin("kubelet"), "--config="+kcfg, "--kubeconfig="+kubeletKubeconfig,
		"--root-dir="+filepath.Join(n.Dir, "kubelet", "root"), "--hostname-override="+n.Name, "--node-ip="+NodeIP, "--v=2")
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		for _, q := range []*proc{etcd, api, kcm, sched, ctrd, kubelet} {
			if q.Exited() {
				return nil, fmt.Errorf("%s exited: %s", q.Name, n.logTail(q.Name))
			}
		}
		out, _ := n.Kubectl(ctx, "get", "node", n.Name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if out == "True" {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("node %s not Ready within 3m (%q): %s", n.Name, out, n.logTail("kubelet"))
		}
		time.Sleep(time.Second)
	}
	n.logf("node %s Ready (%s)", n.Name, n.Dir)
	return n, nil
}

// containerdConfig: its own root, state and socket, the CRI plugin with our pause image, the
// CNI bridge, and restrict_oom_score_adj. This sandbox denies CAP_SYS_RESOURCE, so a negative
// oom_score_adj (the kubelet asks -998 for every pod sandbox and Guaranteed containers) cannot
// be set and runc fails with "can't get final child's PID from pipe: EOF". containerd's
// restrict_oom_score_adj (made for user namespaces) clamps the value at containerd's own (0
// here) instead of a runc wrapper. A property of this test host, never of the product.
func (n *Node) containerdConfig(pause string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
`, filepath.Join(n.Dir, "containerd", "root"), filepath.Join(n.Dir, "containerd", "state"), n.Socket,
		n.Socket+".ttrpc", pause, filepath.Join(n.Dir, "cni", "net.d"))
}

func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "kubenode",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]]}},
    {"type": "loopback"}
  ]
}
`, Bridge, filepath.Join(n.Dir, "cni", "ipam"), Subnet)
}

// kubeletConfig: cgroupfs on the v1 hierarchy (failCgroupV1: false, which kubelets 1.35+ need
// on v1), static pods from manifests/, the server on a free port of the bridge address (for exec and logs,
// client certificates of our CA only), no eviction thresholds that a busy shared disk could trip.
func (n *Node) kubeletConfig(p *pki, port int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[1]s
staticPodPath: %[2]s
fileCheckFrequency: 5s
address: %[7]s
port: %[3]d
readOnlyPort: 0
healthzPort: 0
tlsCertFile: %[4]s
tlsPrivateKeyFile: %[5]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[6]s}
authorization:
  mode: AlwaysAllow
resolvConf: ""
serializeImagePulls: false
evictionHard: {memory.available: "1Mi", nodefs.available: "0%%", imagefs.available: "0%%", nodefs.inodesFree: "0%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: 10s
nodeStatusUpdateFrequency: 5s
`, n.Socket, filepath.Join(n.Dir, "manifests"), port, p.path("kubelet-serving", "crt"), p.path("kubelet-serving", "key"), p.path("ca", "crt"), NodeIP)
}

// ManifestDir is the kubelet's staticPodPath.
func (n *Node) ManifestDir() string { return filepath.Join(n.Dir, "manifests") }

// Kubectl runs kubectl (from Options.Bin) as the admin.
func (n *Node) Kubectl(ctx context.Context, args ...string) (string, error) {
	out, err := run(ctx, 2*time.Minute, nil, filepath.Join(n.opts.Bin, "kubectl"), append([]string{"--kubeconfig=" + n.Kubeconfig}, args...)...)
	return strings.TrimSpace(out), err
}

// Ctr runs ctr against the node's containerd in the k8s.io namespace.
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	return run(ctx, 2*time.Minute, nil, "ctr", append([]string{"--address", n.Socket, "--namespace", "k8s.io"}, args...)...)
}

// ImportImage writes im as a docker-archive and imports it into containerd.
func (n *Node) ImportImage(ctx context.Context, im Image) error {
	f := filepath.Join(n.Dir, strings.NewReplacer("/", "_", ":", "_").Replace(im.Ref)+".tar")
	if err := im.WriteDockerArchive(f); err != nil {
		return err
	}
	defer os.Remove(f)
	return n.ImportArchive(ctx, f)
}

// ImportArchive imports a docker-archive or OCI tarball.
func (n *Node) ImportArchive(ctx context.Context, file string) error {
	_, err := run(ctx, 5*time.Minute, nil, "nsenter", "--mount=/proc/"+strconv.Itoa(n.holder.Pid())+"/ns/mnt", "--",
		"ctr", "--address", n.Socket, "--namespace", "k8s.io", "images", "import", "--no-unpack=false", file)
	return err
}

// Stop removes the pods (the kubelet stops their containers and sandboxes), stops every
// component and removes the cgroups, pod logs, bridge and state directory of the run.
func (n *Node) Stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	ctx := context.Background()
	if n.Kubeconfig != "" && n.kubeletRunning() {
		// Static pods go with their manifests; API pods with the objects.
		files, _ := filepath.Glob(filepath.Join(n.ManifestDir(), "*"))
		for _, f := range files {
			os.Remove(f)
		}
		n.Kubectl(ctx, "delete", "daemonsets,deployments", "--all", "--all-namespaces", "--wait=false")
		n.Kubectl(ctx, "delete", "pods", "--all", "--all-namespaces", "--grace-period=1", "--wait=false")
		deadline := time.Now().Add(45 * time.Second)
		for time.Now().Before(deadline) {
			out, err := n.Ctr(ctx, "tasks", "ls", "-q")
			if err == nil && strings.TrimSpace(out) == "" {
				break
			}
			time.Sleep(time.Second)
		}
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		if n.procs[i].Name == "containerd" && !n.procs[i].Exited() {
			n.removeContainers(ctx)
		}
		n.procs[i].Stop(15 * time.Second)
	}
	if n.Socket != "" {
		killByArg(n.Socket) // shims whose containers could not be deleted
	}
	cleanupHost(n.Dir, n.logf)
	if n.lock != nil {
		n.lock.Close()
	}
}

func (n *Node) kubeletRunning() bool {
	for _, p := range n.procs {
		if p.Name == "kubelet" {
			return !p.Exited()
		}
	}
	return false
}

// removeContainers kills and deletes every container containerd still has (after a failed
// or interrupted pod deletion), so that the shims exit.
func (n *Node) removeContainers(ctx context.Context) {
	out, err := n.Ctr(ctx, "containers", "ls", "-q")
	if err != nil {
		return
	}
	for _, id := range strings.Fields(out) {
		n.Ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
	}
	for _, id := range strings.Fields(out) {
		n.Ctr(ctx, "tasks", "delete", "--force", id)
		n.Ctr(ctx, "containers", "delete", id)
	}
}

// CleanStale removes what runs of this harness whose test process is gone left behind:
// their processes (pid files, shims by socket), cgroups, pod logs, bridge and directories.
// Called with the lock held.
func CleanStale(logf func(string, ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(Base, "run-*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "run-"))
		if err == nil && pid == os.Getpid() {
			continue
		}
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
			filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if b, err := os.ReadFile(filepath.Join(dirs[i], "cgroup.procs")); err == nil {
					for _, f := range strings.Fields(string(b)) {
						if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
							syscall.Kill(pid, syscall.SIGKILL)
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

func (n *Node) waitHTTP(ctx context.Context, p *proc, url string, tls bool, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("%s exited: %s", p.Name, n.logTail(p.Name))
		}
		var err error
		if tls {
			_, err = n.Kubectl(ctx, "get", "--raw", strings.TrimPrefix(url, n.APIServer))
		} else {
			var resp *http.Response
			if resp, err = http.Get(url); err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = errors.New(resp.Status)
				}
			}
		}
		if err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready at %s within %s: %s", p.Name, url, limit, n.logTail(p.Name))
}

func (n *Node) waitFile(ctx context.Context, p *proc, file string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("%s exited: %s", p.Name, n.logTail(p.Name))
		}
		if _, err := os.Stat(file); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s: no %s within %s: %s", p.Name, file, limit, n.logTail(p.Name))
}

func (n *Node) logTail(name string) string {
	b, _ := os.ReadFile(n.LogPath(name))
	return runner.Tail(string(b), 3000)
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

// PodIP, etc. are read through kubectl by the tests; JSON helps them.
func (n *Node) GetJSON(ctx context.Context, v any, args ...string) error {
	out, err := n.Kubectl(ctx, append(args, "-o", "json")...)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(out), v)
}
