package kubenode

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/kubenode/node"
	"github.com/quota-exporter/quota_exporter/test/testenv"
	"github.com/quota-exporter/quota_exporter/test/v2/vm"
)

// crioEnv names a directory with a CRI-O build (crio and pinns). make test has none: Debian
// packages no CRI-O and the Go module proxy refuses github.com/cri-o/cri-o, so a run of make
// fixtures-kubenode-crio with a build made elsewhere records the CRI-O node's tree
// (exporter/collector/testdata/hosts/v2-kubelet-crio), which the collector's tests replay.
const crioEnv = "KUBENODE_CRIO"

// onRunc: under CRI-O crun is the default runtime; one pod runs on runc, as RuntimeClass runc.
var onRunc = map[string]string{"go-healthy": "runc"}

// testCRIONode boots the v2 node with CRI-O in place of containerd (crun by default, conmon in
// each pod's slice, no infra container where the pod needs none), runs kind's workloads and a
// static pod, checks the runtime's layout, records the tree v2-kubelet-crio, then runs the kind
// node's assertions: the names (each container exported once, conmon never, sandboxes as
// container="POD"), the OOM pod's kill once, a resize within one scrape, the planted alerts
// once, crun's throttling, diagnose.
func testCRIONode(t *testing.T, ctx context.Context, root, work, bin string, im images) {
	crio := os.Getenv(crioEnv)
	if crio == "" {
		t.Skip(crioEnv + " is not set: no CRI-O build (not packaged here; make fixtures-kubenode-crio CRIO=<dir with crio and pinns>)")
	}
	h := vm.Find(t)
	r, err := node.BuildVMRoot(ctx, h, node.CRIOPackages, t.Logf)
	must(t, err)
	v := r.Versions
	t.Logf("VM root ready: %s (systemd %s, conmon %s, crun %s, runc %s, skopeo %s)", r.Dir, v["systemd"], v["conmon"], v["crun"], v["runc"], v["skopeo"])
	agent := filepath.Join(work, "vmagent")
	testenv.BuildGo(t, filepath.Join(root, "test"), "./kubenode/node/vmagent", agent)
	start := time.Now()
	c, err := node.StartVM(ctx, node.VMOptions{Bin: bin, Host: h, Root: r, Agent: agent, CRIO: crio,
		PauseImage: im.pause, Images: im.list(), Archives: im.archives(), Logf: t.Logf}, node.VMSpec{Name: "quota-kubenode-crio"})
	must(t, err)
	defer stopOnReturnOrSignal(t, c)()
	version, _ := c.Node.Exec(ctx, "/data/bin/crio", "--version")
	t.Logf("node up in %s; %s", time.Since(start).Round(time.Millisecond), version)
	tg := &target{Cluster: c, layout: c.Node.Layout(), runtimeClasses: onRunc, overrides: vmOverrides, resizes: kindResizes,
		only: append(slices.Clone(kindPods), kindLater...)}
	if h.Accel == "tcg" {
		tg.slow = 3
		tg.scrapeTimeout = "25s"
		tg.exporterCPU = "2"
		tg.exporterArgs = []string{"--scrape.timeout=20s"}
	}
	runWithoutJVMs(t, ctx, tg, root, filepath.Join(work, "crio"), im.exporterRef, "v2-kubelet-crio")
	t.Logf("v2-crio took %s", time.Since(start).Round(time.Second))
}
