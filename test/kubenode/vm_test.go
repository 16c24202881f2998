package kubenode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/quota-exporter/quota_exporter/test/kubenode/node"
	"github.com/quota-exporter/quota_exporter/test/testenv"
	"github.com/quota-exporter/quota_exporter/test/v2/vm"
)

// onCrun are the pods the v2 node runs with crun (RuntimeClass crun, containerd's handler for
// /usr/bin/crun with the systemd driver): a planted problem that is also resized, the OOM
// kill, an init container with two containers, and a pod whose only limits are the pod's.
var onCrun = map[string]string{"go-gomaxprocs": "crun", "oom": "crun", "two-containers": "crun", "pod-level": "crun"}

// Under emulation every guest CPU-second costs a host CPU-second and does a fraction of the
// work, and the planted problems burn all the CPU their limits allow: on the VM node their
// limits are a third of the v1 node's (the alerts compare thread counts with the limit, and
// fire the same) and the calm Go service serves a quarter of the rate, so that the node is
// not saturated and the exporter and the kubelet keep up.
var vmOverrides = map[string]podOverride{
	"jvm-gc-storm":  {CPU: "100m"},
	"go-gomaxprocs": {CPU: "150m"},
	"rss-creep":     {CPU: "100m"},
	"go-healthy":    {Command: []string{"/app/go-healthy", "-rate", "5"}},
}

var vmResizes = []resize{{"jvm-gc-storm", "gc-storm", "200m", 0.2}, {"go-gomaxprocs", "gomaxprocs", "300m", 0.3}}

// kindPods are the workloads of the kind-layout boot: both runtimes, every QoS class, an init
// container, pod-level resources and a static pod (the recorded tree v2-kubelet-kind is theirs);
// kindLater come after the tree is recorded. No JVM: under emulation the JVMs' start-up and
// GC storm alone saturate the VM, and the full v2 suite (KUBENODE_VM=all) runs them.
var (
	kindPods    = []string{"go-gomaxprocs", "go-healthy", "two-containers", "pod-level"}
	kindLater   = []string{"oom"}
	kindResizes = []resize{{"go-gomaxprocs", "gomaxprocs", "300m", 0.3}}
)

// testVMNode runs the suite on a cgroup v2 node with the systemd driver in a qemu VM, records
// its cgroup tree, then runs a second kubelet in the VM with kind's cgroup root and checks the
// names.
func testVMNode(t *testing.T, ctx context.Context, root, work, bin string, im images) {
	c, h, start := startVMNode(t, ctx, root, work, bin, im, "", node.VMSpec{Name: "quota-kubenode-v2"})
	defer stopOnReturnOrSignal(t, c)()
	tg := &target{Cluster: c, layout: c.Node.Layout(), runtimeClasses: onCrun, overrides: vmOverrides, resizes: vmResizes}
	tg.underEmulation(h)
	// The runtimes' layout and the tree once every pod has run and been resized, with a
	// tenant's cgroups that wear another pod's names below the static pod's container.
	tg.afterResize = func(t *testing.T) {
		checkRuntimeLayout(t, ctx, tg)
		plantImpostor(t, ctx, tg)
		recordTree(t, ctx, tg, "v2-kubelet-systemd")
	}
	// In a subtest of its own: a fatal check there still lets the kind node run.
	t.Run("suite", func(t *testing.T) { runSuite(t, ctx, tg, root, work, im.exporterRef) })
	t.Logf("v2-systemd took %s", time.Since(start).Round(time.Second))

	t.Run("kind", func(t *testing.T) {
		start := time.Now()
		must(t, c.SwitchKubelet(ctx, node.VMSpec{Name: "quota-kubenode-kind", Kind: true}))
		tg.layout = c.Node.Layout()
		tg.only = append(slices.Clone(kindPods), kindLater...)
		tg.resizes = kindResizes
		t.Logf("kind node up in %s", time.Since(start).Round(time.Millisecond))
		// The exporter's DaemonSet runs on the new node too (deployed here when the suite was
		// not run); monitoring for this subtest.
		runWithoutJVMs(t, ctx, tg, root, filepath.Join(work, "kind"), im.exporterRef, "v2-kubelet-kind")
		t.Logf("kind took %s", time.Since(start).Round(time.Second))
	})
}

// runWithoutJVMs deploys the exporter and monitoring, runs kindPods and the static pod, checks
// the runtime's layout and records the tree, then runs the suite's assertions on the workloads
// that emulation affords (no JVM): the names, then with kindLater's OOM pod an in-place resize
// within one scrape, each planted problem's alert once through Prometheus and Alertmanager, calm
// pods silent, the OOM kill counted once, the names again, crun's throttling, diagnose.
func runWithoutJVMs(t *testing.T, ctx context.Context, tg *target, root, work, exporterRef, tree string) {
	deployAndMonitor(t, ctx, tg, root, work, exporterRef)
	applyWorkloads(t, ctx, tg, root, work, kindPods)
	b, err := os.ReadFile(filepath.Join(root, "test", "kubenode", "testdata", "pods", "static-sleeper.yaml"))
	must(t, err)
	must(t, tg.Node.AddStaticPod(ctx, "static-sleeper.yaml", b))
	// The kustomize DaemonSet's pod (and the chart's, when it was installed), the workloads
	// and the static pod.
	waitRunning(t, ctx, tg, len(kindPods)+2)
	checkRuntimeLayout(t, ctx, tg)
	recordTree(t, ctx, tg, tree)
	waitScraped(t, ctx, tg)
	checkNames(t, ctx, tg)
	applyWorkloads(t, ctx, tg, root, filepath.Join(work, "later"), kindLater)
	exporterPod := waitRunning(t, ctx, tg, len(tg.only)+2)
	checkResize(t, ctx, tg, fmt.Sprintf("http://%s:10137/metrics", exporterPod.Status.PodIP))
	waitAlerts(t, ctx, tg)
	checkOOMOnce(t, ctx, tg)
	// The names again once the OOM-killed container has restarted (the kubelet links the
	// new one just after its start; until then it is held back, never exported by its
	// pod's names alone) and the dead one's retained kill is exported.
	waitScraped(t, ctx, tg)
	checkNames(t, ctx, tg)
	checkCrunThrottling(t, ctx, tg)
	checkDiagnose(t, ctx, tg, exporterPod.Metadata.Name)
}

// startVMNode builds (or takes from the cache) the VM root, with CRI-O's packages when crio names
// a CRI-O build, and the agent, boots the node and returns it, the VM host and when the boot
// started. The caller stops the cluster.
func startVMNode(t *testing.T, ctx context.Context, root, work, bin string, im images, crio string, spec node.VMSpec) (*node.Cluster, *vm.Host, time.Time) {
	for _, c := range []string{"mmdebstrap", "mke2fs", "chroot"} {
		_, err := exec.LookPath(c)
		testenv.Require(t, err == nil, c+" not found (make deps-apt installs mmdebstrap and e2fsprogs)")
	}
	h := vm.Find(t)
	var extra []string
	if crio != "" {
		extra = node.CRIOPackages
	}
	t0 := time.Now()
	r, err := node.BuildVMRoot(ctx, h, extra, t.Logf)
	must(t, err)
	v := r.Versions
	t.Logf("VM root ready in %s: %s (systemd %s, containerd %s, runc %s, crun %s, conmon %s, skopeo %s)", time.Since(t0).Round(time.Millisecond),
		r.Dir, v["systemd"], v["containerd"], v["runc"], v["crun"], v["conmon"], v["skopeo"])
	agent := filepath.Join(work, "vmagent")
	testenv.BuildGo(t, filepath.Join(root, "test"), "./kubenode/node/vmagent", agent)
	start := time.Now()
	c, err := node.StartVM(ctx, node.VMOptions{Bin: bin, Host: h, Root: r, Agent: agent, CRIO: crio,
		PauseImage: im.pause, Images: im.list(), Archives: im.archives(), Logf: t.Logf}, spec)
	must(t, err)
	t.Logf("node up in %s", time.Since(start).Round(time.Millisecond))
	return c, h, start
}

// underEmulation: under software emulation (TCG) everything in the VM is several times slower.
func (tg *target) underEmulation(h *vm.Host) {
	if h.Accel != "tcg" {
		return
	}
	tg.slow = 3
	tg.scrapeTimeout = "25s"
	tg.exporterCPU = "2"
	tg.exporterArgs = []string{"--scrape.timeout=20s"}
}

// checkCrunThrottling: the Go program on crun burns more than its limit, which crun wrote to
// the scope's "container" subgroup only; the kernel counts its throttling there. The
// container's exported throttled periods rise with the subgroup's cpu.stat (never above it,
// read after the query) and the sampler has windows of it.
func checkCrunThrottling(t *testing.T, ctx context.Context, tg *target) {
	sel := `{job="quota-exporter", namespace="kubenode", pod="go-gomaxprocs", container="gomaxprocs"}`
	var exported, windows float64
	for _, q := range []struct {
		query string
		into  *float64
	}{{"max(quota_cpu_throttled_periods_total" + sel + ")", &exported}, {"max(quota_cpu_throttled_window_ratio_count" + sel + ")", &windows}} {
		res, err := tg.mon.prom.Query(ctx, q.query)
		must(t, err)
		if len(res) == 1 {
			*q.into = res[0].Value
		}
	}
	var id string
	for _, p := range pods(t, ctx, tg) {
		for _, cs := range p.Status.ContainerStatuses {
			if p.Metadata.Name == "go-gomaxprocs" && cs.Name == "gomaxprocs" {
				id = node.BareID(cs.ContainerID)
			}
		}
	}
	out, err := tg.Node.Exec(ctx, "sh", "-c", "cat $(find "+tg.layout.CPURoot+tg.layout.Kubepods+" -type d -name '"+tg.layout.Scope(id)+"')/container/cpu.stat")
	must(t, err)
	var kernel float64
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nr_throttled" {
			kernel, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	t.Logf("crun's subgroup: %g throttled periods in its cpu.stat; the container exports %g, and %g sampler windows", kernel, exported, windows)
	if kernel == 0 {
		fatalf(t, "the Go program on crun was never throttled (subgroup cpu.stat:\n%s)", out)
	}
	if exported <= 0 || exported > kernel || windows <= 0 {
		errorf(t, "the crun container's throttling: exported %g throttled periods (kernel's subgroup %g), %g sampler windows; want 0 < exported <= kernel and windows", exported, kernel, windows)
	}
}

// applyWorkloads applies testdata/pods/workloads.yaml (only the pods named in only, when
// given), with the target's RuntimeClasses and their RuntimeClass objects.
func applyWorkloads(t *testing.T, ctx context.Context, tg *target, root, work string, only []string) {
	b, err := os.ReadFile(filepath.Join(root, "test", "kubenode", "testdata", "pods", "workloads.yaml"))
	must(t, err)
	var docs []string
	handlers := map[string]bool{}
	for _, h := range tg.runtimeClasses {
		handlers[h] = true
	}
	for _, h := range sortedKeys(handlers) {
		docs = append(docs, fmt.Sprintf("apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: %s}\nhandler: %s\n", h, h))
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var obj map[string]any
		must(t, yaml.Unmarshal([]byte(doc), &obj))
		if obj["kind"] == "Pod" {
			name := obj["metadata"].(map[string]any)["name"].(string)
			if only != nil && !slices.Contains(only, name) {
				continue
			}
			spec := obj["spec"].(map[string]any)
			if rc := tg.runtimeClasses[name]; rc != "" {
				spec["runtimeClassName"] = rc
			}
			if o, ok := tg.overrides[name]; ok {
				c := spec["containers"].([]any)[0].(map[string]any)
				if o.CPU != "" {
					c["resources"].(map[string]any)["limits"].(map[string]any)["cpu"] = o.CPU
				}
				if o.Command != nil {
					c["command"] = o.Command
				}
			}
		}
		out, err := yaml.Marshal(obj)
		must(t, err)
		docs = append(docs, string(out))
	}
	must(t, os.MkdirAll(work, 0o755))
	file := filepath.Join(work, "workloads.yaml")
	must(t, os.WriteFile(file, []byte(strings.Join(docs, "---\n")), 0o644))
	_, err = tg.Kubectl(ctx, "apply", "-f", file)
	must(t, err)
}

// waitScraped waits until Prometheus has series of every running container of the node (a
// new node's exporter pod is found by service discovery and scraped after a while), each with
// its container name: the kubelet links a container in /var/log/containers only after the
// runtime started it, and the exporter's resolver reads the links again within its miss
// interval. Series still without a name at the deadline are logged (checkNames tells which).
func waitScraped(t *testing.T, ctx context.Context, tg *target) {
	limit := tg.scale(2 * time.Minute)
	deadline := time.Now().Add(limit)
	for {
		var missing []string
		for _, p := range pods(t, ctx, tg) {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.ContainerID == "" {
					continue
				}
				res, err := tg.mon.prom.Query(ctx, fmt.Sprintf(`count({job="quota-exporter", container_id=%q})`, cs.ContainerID))
				if err != nil || len(res) == 0 {
					missing = append(missing, p.Metadata.Name+"/"+cs.Name)
				}
			}
		}
		unnamed, err := tg.mon.prom.Query(ctx, fmt.Sprintf(`count({job="quota-exporter", cgroup=~%q, container_id!="", container=""})`,
			regexp.QuoteMeta(tg.layout.Kubepods)+".*"))
		if len(missing) == 0 && err == nil && len(unnamed) == 0 {
			return
		}
		if time.Now().After(deadline) {
			if len(missing) > 0 {
				errorf(t, "no series of %v within %s", missing, limit)
			} else {
				t.Logf("container series without a name after %s: %v", limit, unnamed)
			}
			return
		}
		time.Sleep(5 * time.Second)
	}
}

// checkRuntimeLayout checks that the node really has the layout the names are checked on:
// each container's cgroup is a systemd scope named after its id (cri-containerd-<id>.scope,
// CRI-O's crio-<id>.scope) in its pod's slice; crun's containers run in the scope's
// "container" subgroup, with the limits on both, runc's in the scope itself. Under CRI-O,
// crun is the default runtime and each container's conmon has a scope in the pod's slice.
func checkRuntimeLayout(t *testing.T, ctx context.Context, tg *target) {
	checked := 0
	for _, p := range pods(t, ctx, tg) {
		if p.Metadata.Namespace != ns {
			continue
		}
		crun := p.Spec.RuntimeClassName == "crun" || (tg.layout.CRIO && p.Spec.RuntimeClassName != "runc")
		for _, cs := range p.Status.ContainerStatuses {
			id := node.BareID(cs.ContainerID)
			if id == "" || !cs.Ready {
				continue
			}
			out, err := tg.Node.Exec(ctx, "find", tg.layout.CPURoot+tg.layout.Kubepods, "-type", "d", "-name", tg.layout.Scope(id))
			must(t, err)
			dirs := strings.Fields(out)
			if len(dirs) != 1 {
				elsewhere, _ := tg.Node.Exec(ctx, "sh", "-c", "find "+tg.layout.CPURoot+" -type d -name '*"+id+"*'; grep -l "+id+" /proc/[0-9]*/cgroup 2>/dev/null | head -3 | xargs -r cat")
				errorf(t, "%s/%s: cgroups %v, want one %s (restarts %d)\nanywhere, and its processes' cgroups:\n%s",
					p.Metadata.Name, cs.Name, dirs, tg.layout.Scope("<id>"), cs.RestartCount, elsewhere)
				continue
			}
			scope := dirs[0]
			procs, _ := tg.Node.Exec(ctx, "cat", scope+"/cgroup.procs")
			sub, subErr := tg.Node.Exec(ctx, "cat", scope+"/container/cgroup.procs", scope+"/container/cpu.max", scope+"/cpu.max")
			if crun {
				if subErr != nil || strings.TrimSpace(procs) != "" || len(strings.Fields(sub)) < 5 {
					errorf(t, "%s/%s on crun: scope's processes %q, container subgroup %q (%v)", p.Metadata.Name, cs.Name, procs, sub, subErr)
				} else {
					f := strings.Fields(sub)
					t.Logf("%s/%s on crun: processes in %s/container; cpu.max %s %s there, %s %s on the scope", p.Metadata.Name, cs.Name,
						strings.TrimPrefix(scope, tg.layout.CPURoot), f[len(f)-4], f[len(f)-3], f[len(f)-2], f[len(f)-1])
				}
			} else if subErr == nil || strings.TrimSpace(procs) == "" {
				errorf(t, "%s/%s on runc: scope's processes %q, a container subgroup: %t", p.Metadata.Name, cs.Name, procs, subErr == nil)
			}
			if !strings.HasPrefix(strings.TrimPrefix(scope, tg.layout.CPURoot), tg.layout.Kubepods+"/") {
				errorf(t, "%s/%s: cgroup %s is not under %s", p.Metadata.Name, cs.Name, scope, tg.layout.Kubepods)
			}
			if tg.layout.CRIO {
				conmon := filepath.Join(filepath.Dir(scope), "crio-conmon-"+id+".scope")
				if out, err := tg.Node.Exec(ctx, "cat", conmon+"/cgroup.procs"); err != nil || strings.TrimSpace(out) == "" {
					errorf(t, "%s/%s: no conmon process in %s (%v)", p.Metadata.Name, cs.Name, conmon, err)
				}
			}
			checked++
		}
	}
	if checked == 0 {
		errorf(t, "no container's cgroup checked")
	}
}

// plantImpostor does what a tenant with a writable cgroup mount can do in its own container
// (a privileged pod, Docker-in-Docker): below the static pod's container it makes cgroups
// named after the GOMAXPROCS pod and its container, kubelet-style and bare, moves the
// container's process into the first and delegates cpu and memory to them, with limits of
// their own. They are the static pod's container's: the suite's later checks require that
// no cgroup below a container is exported on its own, that the GOMAXPROCS container is
// exported from one cgroup, and that its planted alert fires once with its names.
func plantImpostor(t *testing.T, ctx context.Context, tg *target) {
	var tenant, victimUID, victimID string
	for _, p := range pods(t, ctx, tg) {
		for _, cs := range p.Status.ContainerStatuses {
			id := node.BareID(cs.ContainerID)
			switch {
			case p.Metadata.Namespace == ns && cs.Name == "sleeper" && strings.HasPrefix(p.Metadata.Name, "static-sleeper"):
				tenant = id
			case p.Metadata.Namespace == ns && p.Metadata.Name == "go-gomaxprocs" && cs.Name == "gomaxprocs":
				victimUID, victimID = p.Metadata.UID, id
			}
		}
	}
	if tenant == "" || victimID == "" {
		fatalf(t, "impostor: no static sleeper (%q) or GOMAXPROCS container (%q)", tenant, victimID)
	}
	out, err := tg.Node.Exec(ctx, "find", tg.layout.CPURoot, "-type", "d", "-name", tg.layout.Scope(tenant))
	must(t, err)
	dir := strings.TrimSpace(out)
	if dir == "" || strings.Contains(dir, "\n") {
		fatalf(t, "impostor: the static sleeper's cgroup: %q", out)
	}
	slice := "kubepods-burstable-pod" + strings.ReplaceAll(victimUID, "-", "_") + ".slice"
	script := fmt.Sprintf(`set -e
a=%[1]s; n=$a/%[2]s/cri-containerd-%[3]s.scope; x=$a/x/%[3]s
mkdir -p $n $x
for p in $(cat $a/cgroup.procs); do echo $p > $n/cgroup.procs; done
echo "+cpu +memory" > $a/cgroup.subtree_control
echo "+cpu +memory" > $a/%[2]s/cgroup.subtree_control
echo "+memory" > $a/x/cgroup.subtree_control
echo "50000 100000" > $n/cpu.max
echo 24M > $n/memory.max
echo 16M > $x/memory.max
find $a -mindepth 1 -type d`, dir, slice, victimID)
	out, err = tg.Node.Exec(ctx, "sh", "-c", script)
	if err != nil {
		fatalf(t, "impostor: %v\n%s", err, out)
	}
	t.Logf("impostor: below the static sleeper's %s:\n%s", dir, out)
}
