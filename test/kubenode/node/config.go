package node

import (
	"cmp"
	"fmt"
	"sort"
	"strings"
)

// kubeletConfig is the part of a KubeletConfiguration that differs between nodes.
type kubeletConfig struct {
	Driver        string // cgroupfs or systemd
	CgroupRoot    string // "" (/), or /kubelet as kind sets it
	FailCgroupV1  bool   // false on the v1 host: kubelets from 1.35 refuse cgroup v1 otherwise
	Runtime       string // containerd's socket
	StaticPodPath string
	Address       string // the kubelet's server (exec, logs): the node IP
	Port          int
	TLSCert       string
	TLSKey        string
	ClientCA      string
	// SyncFrequency is how often the kubelet syncs every pod again (10s when empty); changes
	// from the API (a resize) are synced at once whatever it is. Longer under emulation, where
	// each sync of every pod costs the VM seconds of CPU.
	SyncFrequency string
}

// yaml: static pods, the server for exec and logs (client certificates of our CA only), no
// eviction thresholds that a busy shared disk could trip, short sync periods so the test
// sees changes soon.
func (k kubeletConfig) yaml() string {
	var extra strings.Builder
	if !k.FailCgroupV1 {
		extra.WriteString("failCgroupV1: false\n")
	}
	if k.CgroupRoot != "" {
		fmt.Fprintf(&extra, "cgroupRoot: %s\n", k.CgroupRoot)
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: %s
%sfailSwapOn: false
containerRuntimeEndpoint: unix://%s
staticPodPath: %s
fileCheckFrequency: 5s
address: %s
port: %d
readOnlyPort: 0
healthzPort: 0
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization:
  mode: AlwaysAllow
resolvConf: ""
serializeImagePulls: false
evictionHard: {memory.available: "1Mi", nodefs.available: "0%%", imagefs.available: "0%%", nodefs.inodesFree: "0%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: %s
nodeStatusUpdateFrequency: 5s
`, k.Driver, extra.String(), k.Runtime, k.StaticPodPath, k.Address, k.Port, k.TLSCert, k.TLSKey, k.ClientCA, cmp.Or(k.SyncFrequency, "10s"))
}

// containerdConfig is a containerd 1.6 configuration (version 2) with the CRI plugin.
type containerdConfig struct {
	Root, State, Socket string // "" keeps containerd's defaults (/var/lib/containerd, /run/containerd)
	Pause               string
	CNIConfDir          string
	SystemdCgroup       bool
	// Runtimes are runtime handlers (RuntimeClass handler -> runtime binary) besides runc.
	Runtimes map[string]string
	// RestrictOOMScoreAdj: this host's sandbox denies CAP_SYS_RESOURCE, so a negative
	// oom_score_adj (the kubelet asks -998 for every pod sandbox and Guaranteed containers)
	// cannot be set and runc fails with "can't get final child's PID from pipe: EOF".
	// containerd's restrict_oom_score_adj (made for user namespaces) clamps the value at
	// containerd's own (0 here) instead of a runc wrapper. A property of this test host, never
	// of the product; the VM needs none.
	RestrictOOMScoreAdj bool
}

func (c containerdConfig) toml() string {
	var b strings.Builder
	b.WriteString("version = 2\n")
	if c.Root != "" {
		fmt.Fprintf(&b, "root = %q\nstate = %q\n", c.Root, c.State)
	}
	b.WriteString(`disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]` + "\n")
	if c.Socket != "" {
		fmt.Fprintf(&b, "[grpc]\n  address = %q\n[ttrpc]\n  address = %q\n", c.Socket, c.Socket+".ttrpc")
	}
	fmt.Fprintf(&b, `[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = %t
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
`, c.Pause, c.RestrictOOMScoreAdj)
	runtimes := map[string]string{"runc": ""}
	for h, bin := range c.Runtimes {
		runtimes[h] = bin
	}
	handlers := make([]string, 0, len(runtimes))
	for h := range runtimes {
		handlers = append(handlers, h)
	}
	sort.Strings(handlers)
	for _, h := range handlers {
		fmt.Fprintf(&b, `    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%[1]s]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%[1]s.options]
        SystemdCgroup = %[2]t
`, h, c.SystemdCgroup)
		if bin := runtimes[h]; bin != "" {
			fmt.Fprintf(&b, "        BinaryName = %q\n", bin)
		}
	}
	fmt.Fprintf(&b, `  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, c.CNIConfDir)
	return b.String()
}

// cniConfig is a bridge network without NAT (the host routes to the pods) and host-local IPAM;
// the bridge is the pods' default gateway, so that they answer a scraper outside their subnet
// (the host, seen from the VM's pods).
func cniConfig(bridge, subnet, ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "kubenode",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "isDefaultGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]]}},
    {"type": "loopback"}
  ]
}
`, bridge, ipamDir, subnet)
}
