package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/quota-exporter/quota_exporter/test/internal/runner"
	"github.com/quota-exporter/quota_exporter/test/kubenode/node/agentproto"
	"github.com/quota-exporter/quota_exporter/test/v2/vm"
)

// The VM node's network: a tap device whose host end has TapHostIP (the control plane listens
// there), the VM's eth0 VMIP, and the VM's pod bridge VMPodSubnet, routed by the host through
// the VM (no NAT), so that Prometheus on the host scrapes pod IPs as on a real cluster.
const (
	Tap         = "qekn1"
	TapHostIP   = "10.253.79.1"
	VMIP        = "10.253.79.2"
	VMPodSubnet = "10.253.80.0/24"
	vmBridge    = "cni0"
	vmAgentPort = 7070
	vmKind      = "vm"
)

// VMOptions configure a VM cluster.
type VMOptions struct {
	Bin        string   // Kubernetes binaries: the control plane runs here, the kubelet in the VM
	Host       *vm.Host // qemu, the kernel, busybox, kvm or tcg (vm.Find)
	Root       *VMRoot  // BuildVMRoot
	Agent      string   // the vmagent binary (static)
	PauseImage Image
	Images     []Image
	Archives   []string // docker-archive or OCI tarballs (make image's)
	// CRIO is a directory with a CRI-O build (crio, pinns): CRI-O replaces containerd, with
	// crun as its default runtime. The root needs CRIOPackages (BuildVMRoot).
	CRIO      string
	CPUs      int // default 2, as this host has: the workloads see the CPU count of the v1 node
	MemoryMiB int // default 3072
	Logf      func(format string, args ...any)
}

// VMSpec is one boot of the VM node: its name and the kubelet's cgroup root.
type VMSpec struct {
	Name string
	// Kind boots the node as kind configures its nodes: the kubelet in kubelet.slice with
	// cgroupRoot /kubelet (kind's pkg/cluster/internal/kubeadm/config.go), so that pods live
	// under /kubelet.slice/kubelet-kubepods.slice.
	Kind bool
}

// VMNode is one boot of the VM: systemd, containerd (runc and crun, both with the systemd
// cgroup driver) and the kubelet (systemd driver). Nothing it writes survives it: the root
// image is booted with qemu's snapshot=on and the run's data disk is read-only.
type VMNode struct {
	spec   VMSpec
	dir    string
	ps     *procSet
	qemu   *proc
	token  string
	client *http.Client
	crio   bool // CRI-O runs the containers, not containerd
}

func (n *VMNode) Name() string { return n.spec.Name }

func (n *VMNode) Layout() Layout {
	if n.crio {
		return layoutCRIO
	}
	if n.spec.Kind {
		return layoutKind
	}
	return layoutV2
}

// AddStaticPod writes the manifest into /etc/kubernetes/manifests in the VM.
func (n *VMNode) AddStaticPod(ctx context.Context, file string, manifest []byte) error {
	_, err := n.run(ctx, manifest, 60, "sh", "-c", `cat > "/etc/kubernetes/manifests/$0"`, file)
	return err
}

// Exec runs a command in the VM through the agent, within ten minutes (a bound: under
// emulation a dump of the pods' cgroups takes tens of seconds).
func (n *VMNode) Exec(ctx context.Context, argv ...string) (string, error) {
	return n.run(ctx, nil, 600, argv...)
}

func (n *VMNode) SandboxIDs(ctx context.Context) ([]string, error) {
	if n.crio {
		out, err := n.Exec(ctx, "journalctl", "--no-pager", "-o", "cat", "-u", "crio")
		return crioSandboxIDs(out), err
	}
	out, err := n.Exec(ctx, "ctr", "--namespace", "k8s.io", "containers", "ls", "-q", sandboxFilter)
	return sandboxIDs(out), err
}

// LogTail: "console" is the VM's serial console; other components are systemd units in the VM.
func (n *VMNode) LogTail(component string) string {
	if component == "console" || n.qemu == nil || n.qemu.Exited() {
		return n.ps.logTail("console-" + n.spec.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := n.Exec(ctx, "journalctl", "--no-pager", "-o", "short-monotonic", "-n", "150", "-u", component)
	if err != nil {
		return fmt.Sprintf("journalctl -u %s: %v", component, err)
	}
	return runner.Tail(out, 6000)
}

func newAgentClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}}
}

func (n *VMNode) run(ctx context.Context, stdin []byte, timeout int, argv ...string) (string, error) {
	body, _ := json.Marshal(agentproto.Request{Argv: argv, Stdin: stdin, Timeout: timeout})
	ctx, cancel := context.WithTimeout(ctx, time.Duration(timeout+10)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s:%d/exec", VMIP, vmAgentPort), bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("X-Token", n.token)
	resp, err := n.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
		return "", fmt.Errorf("vmagent: %s: %s", resp.Status, b)
	}
	var r agentproto.Response
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return "", err
	}
	if r.Exit != 0 {
		return string(r.Output), fmt.Errorf("in the VM: %s: exit %d %s\n%s", strings.Join(argv, " "), r.Exit, r.Error, runner.Tail(string(r.Output), 3000))
	}
	return string(r.Output), nil
}

// StartVM brings up a control plane on this host, listening on the tap device's address, and
// boots the VM node spec; it returns once the node is Ready. On error what was started is stopped.
func StartVM(ctx context.Context, o VMOptions, spec VMSpec) (_ *Cluster, err error) {
	if o.CPUs == 0 {
		o.CPUs = 2
	}
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 3072
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	dir, lock, err := claim(vmKind)
	if err != nil {
		return nil, err
	}
	ps := &procSet{dir: dir, logf: o.Logf}
	c := &Cluster{}
	c.stop = func() {
		if n, ok := c.Node.(*VMNode); ok {
			n.stop()
		}
		ps.stop(nil)
		cleanupVM(dir, o.Logf)
		lock.Close()
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	cleanStaleVMs(o.Logf)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"tuntap", "add", "dev", Tap, "mode", "tap"},
		{"addr", "add", TapHostIP + "/24", "dev", Tap},
		{"link", "set", Tap, "up"},
		{"route", "add", VMPodSubnet, "via", VMIP, "dev", Tap},
	} {
		if _, err := run(ctx, 30*time.Second, nil, "ip", args...); err != nil {
			return nil, err
		}
	}
	if c.ControlPlane, err = startControlPlane(ctx, dir, o.Bin, TapHostIP, ps); err != nil {
		return nil, err
	}
	c.vm = &o
	if err := c.bootVM(ctx, spec); err != nil {
		return nil, err
	}
	return c, nil
}

// SwitchKubelet replaces the VM node's kubelet by one for spec (another node name, another
// cgroup root) in the same VM, as a second kubelet run: the old kubelet is stopped, every pod's
// containers and log entries are removed, and the old node's Node object and pods are deleted.
// containerd, its images and the VM stay.
func (c *Cluster) SwitchKubelet(ctx context.Context, spec VMSpec) error {
	n, ok := c.Node.(*VMNode)
	if !ok {
		return errors.New("not a VM cluster")
	}
	if n.crio {
		return errNoCRIOSwitch
	}
	start := time.Now()
	old := n.spec.Name
	files, err := c.kubeletFiles(spec)
	if err != nil {
		return err
	}
	if _, err := n.run(ctx, nil, 600, "sh", "-c", vmRemovePods); err != nil {
		return err
	}
	// The node first: while it exists, the DaemonSet controller makes each DaemonSet's pod
	// for it again as soon as it is deleted (the exporter's, the chart's).
	if out, err := c.Kubectl(ctx, "delete", "node", old, "--wait=false"); err != nil {
		return fmt.Errorf("delete node %s: %w: %s", old, err, out)
	}
	if err := c.deleteNodePods(ctx, old); err != nil {
		return err
	}
	for name, content := range files {
		if _, err := n.run(ctx, content, 60, "sh", "-c", `mkdir -p "$(dirname "$0")" && cat > "$0"`, "/"+name); err != nil {
			return err
		}
	}
	n.spec = spec
	if err := n.startKubelet(ctx); err != nil {
		return err
	}
	if err := c.waitNodeReady(ctx, spec.Name, 6*time.Minute, func() error { return c.ps.exited() }); err != nil {
		return fmt.Errorf("%w\nkubelet:\n%s", err, n.LogTail("kubelet"))
	}
	c.vm.Logf("VM node %s Ready %s after its switch from %s", spec.Name, time.Since(start).Round(time.Second), old)
	return nil
}

// deleteNodePods deletes the API's pods bound to node (its kubelet is gone, so nothing else
// would: no pod garbage collector runs) and waits until they are gone, so that the next
// kubelet's pods can be created under the same names.
func (c *Cluster) deleteNodePods(ctx context.Context, node string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var list struct {
			Items []struct {
				Metadata struct{ Name, Namespace string }
			}
		}
		if err := c.GetJSON(ctx, &list, "get", "pods", "--all-namespaces", "--field-selector=spec.nodeName="+node); err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d pods of node %s still in the API after 2m", len(list.Items), node)
		}
		for _, p := range list.Items {
			_, _ = c.Kubectl(ctx, "-n", p.Metadata.Namespace, "delete", "pod", p.Metadata.Name, "--force", "--grace-period=0", "--wait=false")
		}
		time.Sleep(2 * time.Second)
	}
}

// vmRemovePods stops the kubelet and removes what it ran: the pods' containers (their tasks
// killed, then deleted; containerd restarted so that its CRI plugin forgets them), static pod
// manifests and the pods' log entries.
const vmRemovePods = `systemctl stop kubelet
rm -f /etc/kubernetes/manifests/*
for id in $(ctr -n k8s.io tasks ls -q); do ctr -n k8s.io tasks kill -s SIGKILL "$id"; done
for id in $(ctr -n k8s.io containers ls -q); do ctr -n k8s.io tasks delete -f "$id" 2>/dev/null; ctr -n k8s.io containers delete "$id" || exit 1; done
systemctl restart containerd
rm -rf /var/log/pods/* /var/log/containers/*
`

// bootVM writes the node's data disk (the kubelet, the agent, configurations, credentials and
// images), boots the VM, starts containerd, imports the images and starts the kubelet.
func (c *Cluster) bootVM(ctx context.Context, spec VMSpec) error {
	o := c.vm
	n := &VMNode{spec: spec, dir: filepath.Join(c.Dir, "nodes", spec.Name), ps: &procSet{dir: filepath.Join(c.Dir, "nodes", spec.Name), logf: o.Logf},
		client: newAgentClient(), crio: o.CRIO != ""}
	c.Node = n
	disk, err := c.writeDataDisk(ctx, n)
	if err != nil {
		return err
	}
	prepared := time.Now()
	for attempt := 1; ; attempt++ {
		err = n.start(ctx, c, disk, prepared)
		if err == nil || !errors.Is(err, errLockedUp) || attempt == 2 {
			return err
		}
		// A guest whose vCPUs spin on each other (seen under emulation during containerd's start:
		// both vCPUs stuck for minutes, never recovering) boots once more from the same disks.
		o.Logf("VM node %s: %v; booting it again", spec.Name, err)
		n.ps.stop(nil)
		console := n.ps.LogPath("console-" + spec.Name)
		_ = os.Rename(console, strings.TrimSuffix(console, ".log")+".locked-up.log")
		prepared = time.Now()
	}
}

// start boots the VM from its disks and starts containerd and the kubelet, until the node is
// Ready; errLockedUp when the guest kernel locked up meanwhile.
func (n *VMNode) start(ctx context.Context, c *Cluster, disk string, prepared time.Time) error {
	o, spec := c.vm, n.spec
	ctx, stop := n.watchLockup(ctx)
	defer stop()
	cause := func(err error) error {
		if errors.Is(context.Cause(ctx), errLockedUp) {
			return fmt.Errorf("%w: %s", errLockedUp, strings.TrimSpace(n.lockup()))
		}
		return err
	}
	if err := n.boot(ctx, o, disk); err != nil {
		return cause(err)
	}
	booted := time.Now()
	if err := n.startRuntime(ctx); err != nil {
		return cause(err)
	}
	imported := time.Now()
	if err := n.startKubelet(ctx); err != nil {
		return cause(err)
	}
	alive := func() error {
		if n.qemu.Exited() {
			return fmt.Errorf("qemu exited: %s", n.ps.logTail("console-"+spec.Name))
		}
		return c.ps.exited()
	}
	if err := c.waitNodeReady(ctx, spec.Name, 6*time.Minute, alive); err != nil {
		return cause(fmt.Errorf("%w\nkubelet:\n%s", err, n.LogTail("kubelet")))
	}
	o.Logf("VM node %s (%s, %d vCPUs) Ready %s after the boot: boot to agent %s, the runtime and images %s, kubelet to Ready %s",
		spec.Name, o.Host.Accel, o.CPUs, time.Since(prepared).Round(time.Second),
		booted.Sub(prepared).Round(time.Second), imported.Sub(booted).Round(time.Second), time.Since(imported).Round(time.Second))
	return nil
}

// errLockedUp: the guest kernel's watchdog saw a vCPU stuck for longer than lockupLimit.
var errLockedUp = errors.New("the guest kernel locked up")

// lockupLimit is how long a vCPU may be stuck before the boot is given up: the watchdog also
// reports vCPUs that the loaded host did not run for 20 s or more, which recover.
const lockupLimit = 100

var softLockup = regexp.MustCompile(`soft lockup - CPU#\d+ stuck for (\d+)s!.*`)

// lockup is the console's last soft-lockup report of a vCPU stuck for lockupLimit seconds or
// more, or "".
func (n *VMNode) lockup() string {
	b, _ := os.ReadFile(n.ps.LogPath("console-" + n.spec.Name))
	last := ""
	for _, m := range softLockup.FindAllSubmatch(b, -1) {
		if s, _ := strconv.Atoi(string(m[1])); s >= lockupLimit {
			last = string(m[0])
		}
	}
	return last
}

// watchLockup returns a context cancelled with errLockedUp when the console reports a lockup.
func (n *VMNode) watchLockup(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if n.lockup() != "" {
					cancel(errLockedUp)
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// writeDataDisk writes what the VM needs for this boot into an ext4 image.
func (c *Cluster) writeDataDisk(ctx context.Context, n *VMNode) (string, error) {
	o := c.vm
	data := filepath.Join(n.dir, "data")
	tok := make([]byte, 16)
	rand.Read(tok)
	n.token = hex.EncodeToString(tok)
	for _, d := range []string{"bin", "images", "etc/containerd", "etc/crio", "etc/containers/registries.conf.d", "etc/cni/net.d", "etc/kubernetes/pki"} {
		if err := os.MkdirAll(filepath.Join(data, d), 0o755); err != nil {
			return "", err
		}
	}
	type copied struct{ src, dst string }
	bins := []copied{{filepath.Join(o.Bin, "kubelet"), "bin/kubelet"}, {o.Agent, "bin/vmagent"}}
	if n.crio {
		bins = append(bins, copied{filepath.Join(o.CRIO, "crio"), "bin/crio"}, copied{filepath.Join(o.CRIO, "pinns"), "bin/pinns"})
	}
	for _, f := range bins {
		if err := linkOrCopy(f.src, filepath.Join(data, f.dst)); err != nil {
			return "", err
		}
	}
	kubelet, err := c.kubeletFiles(n.spec)
	if err != nil {
		return "", err
	}
	for name, content := range kubelet {
		if err := os.WriteFile(filepath.Join(data, name), content, 0o644); err != nil {
			return "", err
		}
	}
	ctrd := containerdConfig{Pause: o.PauseImage.FullRef(), CNIConfDir: "/etc/cni/net.d", SystemdCgroup: true,
		Runtimes: map[string]string{"crun": "/usr/bin/crun"}}
	files := map[string]string{
		"etc/containerd/config.toml":         ctrd.toml(),
		"etc/cni/net.d/10-kubenode.conflist": cniConfig(vmBridge, VMPodSubnet, "/var/lib/cni/networks"),
		"token":                              n.token + "\n",
		"init.sh":                            vmInitScript,
	}
	if n.crio {
		if err := os.WriteFile(filepath.Join(data, "bin", "crun"), []byte(crunSpecVersion), 0o755); err != nil {
			return "", err
		}
		files["etc/crio/crio.conf"] = crioConfig(o.PauseImage.FullRef(), "/data/bin/pinns")
		files["etc/containers/registries.conf.d/90-kubenode.conf"] = crioRegistries
	}
	var refs strings.Builder
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(data, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	for _, im := range append([]Image{o.PauseImage}, o.Images...) {
		if err := im.WriteDockerArchive(filepath.Join(data, "images", imageFileName(im))); err != nil {
			return "", err
		}
		fmt.Fprintln(&refs, imageFileName(im), im.FullRef())
	}
	for _, f := range o.Archives {
		if err := linkOrCopy(f, filepath.Join(data, "images", filepath.Base(f))); err != nil {
			return "", err
		}
		if n.crio {
			tags, err := archiveRefs(f)
			if err != nil {
				return "", err
			}
			for _, ref := range tags {
				fmt.Fprintln(&refs, filepath.Base(f), ref)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(data, "images", "refs"), []byte(refs.String()), 0o644); err != nil {
		return "", err
	}
	disk := filepath.Join(n.dir, "data.img")
	err = makeExt4(ctx, data, disk)
	os.RemoveAll(data)
	return disk, err
}

// kubeletFiles are a kubelet's credentials (client and serving certificates of its node name),
// kubeconfig and configuration, by path relative to the VM's / (under etc/kubernetes).
func (c *Cluster) kubeletFiles(spec VMSpec) (map[string][]byte, error) {
	const pki = "/etc/kubernetes/pki" // where the VM sees the credentials
	dir := filepath.Join(c.Dir, "nodes", spec.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := c.nodeCredentials(spec.Name, VMIP, filepath.Join(dir, "kubelet-host.kubeconfig")); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubelet.kubeconfig")
	if err := c.pki.kubeconfigAt(kubeconfig, c.APIServer, "kubelet-client-"+spec.Name, pki); err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for src, dst := range map[string]string{kubeconfig: "etc/kubernetes/kubelet.kubeconfig"} {
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		files[dst] = b
	}
	for _, f := range []string{"ca.crt", "kubelet-client-" + spec.Name + ".crt", "kubelet-client-" + spec.Name + ".key",
		"kubelet-serving-" + spec.Name + ".crt", "kubelet-serving-" + spec.Name + ".key"} {
		b, err := os.ReadFile(c.PKIFile(f))
		if err != nil {
			return nil, err
		}
		files["etc/kubernetes/pki/"+f] = b
	}
	runtime := "/run/containerd/containerd.sock"
	if c.vm.CRIO != "" {
		runtime = crioSocket
	}
	kc := kubeletConfig{Driver: "systemd", FailCgroupV1: true, Runtime: runtime, SyncFrequency: "1m",
		StaticPodPath: "/etc/kubernetes/manifests", Address: VMIP, Port: 10250,
		TLSCert: pki + "/kubelet-serving-" + spec.Name + ".crt", TLSKey: pki + "/kubelet-serving-" + spec.Name + ".key", ClientCA: pki + "/ca.crt"}
	if spec.Kind {
		kc.CgroupRoot = "/kubelet"
	}
	files["etc/kubernetes/kubelet.yaml"] = []byte(kc.yaml())
	return files, nil
}

// boot starts qemu and waits until the agent answers (systemd has run kubenode-data.service).
func (n *VMNode) boot(ctx context.Context, o *VMOptions, disk string) error {
	args := []string{"-accel", o.Host.Accel, "-smp", fmt.Sprint(o.CPUs), "-m", fmt.Sprint(o.MemoryMiB),
		"-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio", "-no-reboot",
		"-kernel", o.Root.Kernel, "-initrd", o.Root.Initrd,
		// The kernel's crypto self-tests and speculation mitigations cost seconds of boot and every
		// system call under emulation, and protect nothing in a throw-away test VM.
		"-append", "console=ttyS0 panic=-1 no_timer_check quiet systemd.show_status=0 cryptomgr.notests mitigations=off",
		"-drive", "file=" + o.Root.Image + ",if=virtio,format=raw,snapshot=on",
		"-drive", "file=" + disk + ",if=virtio,format=raw,readonly=on",
		"-device", "virtio-rng-pci",
		"-netdev", "tap,id=n0,ifname=" + Tap + ",script=no,downscript=no", "-device", "virtio-net-pci,netdev=n0"}
	if o.Host.Accel == "tcg" {
		args = append(args, "-cpu", "max") // RDRAND and the rest of what the emulator offers
	}
	var err error
	if n.qemu, err = n.ps.start("console-"+n.spec.Name, o.Host.Qemu, args...); err != nil {
		return err
	}
	deadline := time.Now().Add(6 * time.Minute)
	for {
		if _, err := n.run(ctx, nil, 10, "true"); err == nil {
			return nil
		}
		if n.qemu.Exited() || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the VM's agent did not answer within 6m (qemu exited: %t):\n%s", n.qemu.Exited(), n.ps.logTail("console-"+n.spec.Name))
		}
		time.Sleep(time.Second)
	}
}

// startRuntime starts containerd (or CRI-O) and imports the images of the data disk.
func (n *VMNode) startRuntime(ctx context.Context) error {
	if n.crio {
		// As CRI-O's crio.service runs it (Type=notify: started once the socket serves).
		if _, err := n.run(ctx, nil, 300, "systemd-run", "--unit=crio", "-p", "Type=notify", "-p", "TasksMax=infinity",
			"-p", "OOMScoreAdjust=-999", "-p", "Environment=GOTRACEBACK=crash", "/data/bin/crio", "--config=/etc/crio/crio.conf"); err != nil {
			return fmt.Errorf("%w\n%s", err, n.LogTail("crio"))
		}
		_, err := n.run(ctx, nil, 600, "sh", "-c", crioImport)
		return err
	}
	if _, err := n.run(ctx, nil, 300, "systemctl", "start", "containerd"); err != nil {
		return fmt.Errorf("%w\n%s", err, n.LogTail("containerd"))
	}
	_, err := n.run(ctx, nil, 600, "sh", "-c", `for f in /data/images/*.tar; do ctr --namespace k8s.io images import --no-unpack=false "$f" || exit 1; done`)
	return err
}

// startKubelet starts the kubelet as a transient unit: in system.slice as a distribution's
// kubelet.service runs, or in kubelet.slice as kind's does.
func (n *VMNode) startKubelet(ctx context.Context) error {
	slice := "system.slice"
	if n.spec.Kind {
		slice = "kubelet.slice"
	}
	_, err := n.run(ctx, nil, 120, "systemd-run", "--unit=kubelet", "--slice="+slice,
		"-p", "CPUAccounting=yes", "-p", "MemoryAccounting=yes", "-p", "KillMode=process",
		"/data/bin/kubelet", "--config=/etc/kubernetes/kubelet.yaml", "--kubeconfig=/etc/kubernetes/kubelet.kubeconfig",
		"--root-dir=/var/lib/kubelet/"+n.spec.Name,
		"--hostname-override="+n.spec.Name, "--node-ip="+VMIP, "--v=1",
		// cAdvisor's per-container statistics every 10 s are the kubelet's largest steady cost
		// under emulation; nothing here reads them.
		"--housekeeping-interval=30s")
	return err
}

// vmInitScript runs as kubenode-data.service: the network, the configuration files where
// containerd and the kubelet read them, and the agent.
var vmInitScript = fmt.Sprintf(`ip addr add %[1]s/24 dev eth0
ip link set eth0 up
ip route add default via %[2]s
mkdir -p /etc/containerd /etc/cni/net.d /etc/kubernetes/manifests
cp /data/etc/containerd/config.toml /etc/containerd/config.toml
cp /data/etc/cni/net.d/* /etc/cni/net.d/
if [ -f /data/etc/crio/crio.conf ]; then cp -r /data/etc/crio /data/etc/containers /etc/; fi
cp -r /data/etc/kubernetes/. /etc/kubernetes/
systemd-run --unit=kubenode-agent /data/bin/vmagent -listen %[1]s:%[3]d -token-file /data/token
`, VMIP, TapHostIP, vmAgentPort)

// stop powers the VM off (nothing in it needs to survive).
func (n *VMNode) stop() {
	n.ps.stop(nil)
	os.RemoveAll(n.dir)
}

// makeExt4 makes an ext4 image of dir without mounting it, with room for the files.
func makeExt4(ctx context.Context, dir, img string) error {
	var size int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				size += info.Size()
			}
		}
		return nil
	})
	mib := size/(1<<20)*5/4 + 64
	_, err := run(ctx, 5*time.Minute, nil, "mke2fs", "-q", "-t", "ext4", "-d", dir, "-F", img, fmt.Sprintf("%dM", mib))
	return err
}

// linkOrCopy hard-links src to dst (mke2fs -d copies a symlink as a symlink), or copies it.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	out, err := exec.Command("cp", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp %s: %v: %s", src, err, out)
	}
	return nil
}

// cleanStaleVMs removes what VM runs whose test process is gone left behind: their processes
// (qemu, the control plane), the tap device and directories. Called with the lock held.
func cleanStaleVMs(logf func(string, ...any)) {
	for _, d := range staleRuns(vmKind) {
		if logf != nil {
			logf("removing the leftovers of an earlier run: %s", d)
		}
		killRecorded(d)
		nodes, _ := filepath.Glob(filepath.Join(d, "nodes", "*"))
		for _, nd := range nodes {
			killRecorded(nd)
		}
		cleanupVM(d, logf)
	}
}

// cleanupVM removes the tap device (and with it the route to the VM's pods) and the run directory.
func cleanupVM(dir string, logf func(string, ...any)) {
	if _, err := net.InterfaceByName(Tap); err == nil {
		if out, err := exec.Command("ip", "link", "delete", Tap).CombinedOutput(); err != nil && logf != nil {
			logf("ip link delete %s: %v: %s", Tap, err, out)
		}
	}
	if err := os.RemoveAll(dir); err != nil && logf != nil {
		logf("removing %s: %v", dir, err)
	}
}
