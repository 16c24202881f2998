package kubenode

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/kubenode/node"
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
	c, h, start := startVMNode(t, ctx, root, work, bin, im, crio, node.VMSpec{Name: "quota-kubenode-crio"})
	defer stopOnReturnOrSignal(t, c)()
	version, _ := c.Node.Exec(ctx, "/data/bin/crio", "--version")
	t.Logf("%s", version)
	tg := &target{Cluster: c, layout: c.Node.Layout(), runtimeClasses: onRunc, overrides: vmOverrides, resizes: kindResizes,
		only: append(slices.Clone(kindPods), kindLater...)}
	tg.underEmulation(h)
	runWithoutJVMs(t, ctx, tg, root, filepath.Join(work, "crio"), im.exporterRef, "v2-kubelet-crio")
	t.Logf("v2-crio took %s", time.Since(start).Round(time.Second))
}
