package kubenode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/quota-exporter/quota_exporter/test/e2e/stack"
	"github.com/quota-exporter/quota_exporter/test/internal/runner"
	"github.com/quota-exporter/quota_exporter/test/kubenode/node"
	"github.com/quota-exporter/quota_exporter/test/testenv"
)

const ns = "kubenode"

// planted: the alert each problem pod must fire, once, naming its pod and container.
var planted = []plantedProblem{
	{"QuotaJVMGCThreadsExceedCPULimit", "jvm-gc-storm", "gc-storm"},
	{"QuotaGoMaxProcsExceedsCPULimit", "go-gomaxprocs", "gomaxprocs"},
	{"QuotaMallocArenaBloat", "rss-creep", "creep"},
	{"QuotaContainerOOMKilled", "oom", "oom"},
}

type plantedProblem struct{ alert, pod, container string }

// planted are the planted problems among the target's workloads.
func (tg *target) planted() []plantedProblem {
	var out []plantedProblem
	for _, p := range planted {
		if tg.runs(p.pod) {
			out = append(out, p)
		}
	}
	return out
}

// calm pods must fire nothing (the static pod's mirror is named after the node).
func (tg *target) calm() []string {
	var out []string
	for _, p := range []string{"jvm-healthy", "go-healthy", "two-containers", "pod-level"} {
		if tg.runs(p) {
			out = append(out, p)
		}
	}
	return append(out, "static-sleeper-"+tg.Node.Name())
}

// runs tells whether the target runs the workload pod (all of workloads.yaml when only is nil).
func (tg *target) runs(pod string) bool {
	return tg.only == nil || slices.Contains(tg.only, pod)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		fatal(t, err)
	}
}

func freePorts(t *testing.T, k int) []int {
	var ports []int
	var ls []net.Listener
	for i := 0; i < k; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func prerequisites(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "needs root (runs a kubelet, containerd and real cgroups)")
	for _, c := range []string{"etcd", "gcc", "javac", "ldd", "ip"} {
		_, err := exec.LookPath(c)
		testenv.Require(t, err == nil, c+" not found (make deps-apt installs etcd-server)")
	}
}

// target is one cluster the assertions run against, and what differs between them.
type target struct {
	*node.Cluster
	layout node.Layout
	mon    *monitoring
	// podMonitor is examples/kubernetes' PodMonitor, set once the exporter is deployed.
	podMonitor map[string]any
	// runtimeClasses: pods that run with a RuntimeClass (pod name -> handler).
	runtimeClasses map[string]string
	// overrides change a pod's first container (pod name -> CPU limit and command), resizes
	// are the in-place resizes checkResize makes (defaultResizes when nil).
	overrides map[string]podOverride
	resizes   []resize
	slow      float64 // how much longer than on this host things take on the node (emulation)
	// scrapeTimeout replaces the PodMonitor's (the exporter's own --scrape.timeout bounds a
	// scrape at 10 s; under emulation one takes seconds).
	scrapeTimeout string
	// exporterCPU replaces the exporter's CPU limit (kustomize DaemonSet and chart): under
	// software emulation a guest CPU-second does a fraction of the work, and the
	// DaemonSet's 500m left the exporter throttled past every read's time bound.
	exporterCPU string
	// afterResize runs right after the resize check, before the slow alert checks (the VM
	// node records its tree there).
	afterResize func(t *testing.T)
	// exporterArgs are added to the exporter's (kustomize DaemonSet and chart).
	exporterArgs []string
	// only names the workloads of testdata/pods/workloads.yaml the target runs (nil: all); the
	// planted problems and calm pods checked are those among them.
	only []string
}

type podOverride struct {
	CPU     string   // the CPU limit
	Command []string // the command
}

// resize is an in-place change of a container's CPU limit to cpu (cores).
type resize struct {
	pod, container, cpu string
	cores               float64
}

// defaultResizes double the GC-storm JVM's and the Go program's CPU limits.
var defaultResizes = []resize{{"jvm-gc-storm", "gc-storm", "600m", 0.6}, {"go-gomaxprocs", "gomaxprocs", "1", 1}}

// scale stretches a time limit by the node's slowness.
func (tg *target) scale(d time.Duration) time.Duration {
	if tg.slow > 1 {
		return time.Duration(float64(d) * tg.slow)
	}
	return d
}

// images are the test's container images, built once for every node.
type images struct {
	pause, workloads, exporter node.Image
	archive, exporterRef       string // make image's tarball (make test-kubenode), else exporter is built here
}

func (im images) list() []node.Image {
	out := []node.Image{im.workloads}
	if im.archive == "" {
		out = append(out, im.exporter)
	}
	return out
}

func (im images) archives() []string {
	if im.archive == "" {
		return nil
	}
	return []string{im.archive}
}

// TestKubeNode runs the exporter as examples/kubernetes deploys it on real nodes (kubelet,
// containerd, API server) beside real workloads, scraped by Prometheus the way the PodMonitor
// says, and checks names, OOM counting, in-place resize, alerts, diagnose and the Helm chart on
// each: this host's cgroup v1 hierarchy with the cgroupfs driver and runc, and a cgroup v2 VM
// with systemd, containerd's runc and crun with the systemd driver, then kind's layout.
func TestKubeNode(t *testing.T) {
	t.Cleanup(func() { reportFailures(t) })
	prerequisites(t)
	root := testenv.RepoRoot()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()

	// Binaries and images.
	t0 := time.Now()
	bin, err := node.BuildKubernetes(ctx, filepath.Join(root, "test", "kubenode", "k8sbuild"), t.Logf)
	must(t, err)
	t.Logf("Kubernetes binaries ready in %s: %s", time.Since(t0).Round(time.Millisecond), bin)
	work := t.TempDir()
	t0 = time.Now()
	im := images{pause: pauseImage(t, work), workloads: workloadsImage(t, root, work)}
	// make test-kubenode passes make image's tarball; `go test` alone builds the same image here.
	im.archive, im.exporterRef = os.Getenv("KUBENODE_EXPORTER_IMAGE"), os.Getenv("KUBENODE_EXPORTER_REF")
	if im.archive == "" {
		im.exporter = exporterImage(t, root, work)
		im.exporterRef = im.exporter.Ref
	}
	t.Logf("images built in %s", time.Since(t0).Round(time.Millisecond))

	t.Run("v1-cgroupfs", func(t *testing.T) {
		for _, c := range []string{"containerd", "runc", "ctr", "unshare", "nsenter", "/bin/busybox", "/usr/lib/cni/bridge"} {
			_, err := exec.LookPath(c)
			testenv.Require(t, err == nil, c+" not found (make deps-apt installs containerd, runc, busybox-static and containernetworking-plugins)")
		}
		_, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
		testenv.Require(t, err == nil, "needs the cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu (this node runs the kubelet on v1)")
		start := time.Now()
		c, err := node.StartHost(ctx, node.HostOptions{Bin: bin, PauseImage: im.pause, Images: im.list(), Archives: im.archives(), Logf: t.Logf})
		must(t, err)
		defer stopOnReturnOrSignal(t, c)()
		t.Logf("node up in %s", time.Since(start).Round(time.Millisecond))
		tg := &target{Cluster: c, layout: c.Node.Layout()}
		runSuite(t, ctx, tg, root, work, im.exporterRef)
		t.Logf("v1-cgroupfs took %s", time.Since(start).Round(time.Second))
	})
	t.Run("v2-systemd", func(t *testing.T) { testVMNode(t, ctx, root, work, bin, im) })
	t.Run("v2-crio", func(t *testing.T) { testCRIONode(t, ctx, root, work, bin, im) })
}

// stopOnReturnOrSignal tears the cluster down when the test returns (with the node's logs
// when it failed), on SIGINT/SIGTERM, and otherwise the next run cleans up after a crash.
func stopOnReturnOrSignal(t *testing.T, c *node.Cluster) func() {
	done := make(chan struct{})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
			c.Stop()
			os.Exit(1)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		if t.Failed() {
			runtime := "containerd"
			if c.Node.Layout().CRIO {
				runtime = "crio"
			}
			for _, comp := range []string{"kubelet", runtime} {
				t.Logf("%s log (tail):\n%s", comp, runner.Tail(c.Node.LogTail(comp), 4000))
			}
		}
		t0 := time.Now()
		c.Stop()
		t.Logf("teardown took %s", time.Since(t0).Round(time.Millisecond))
	}
}

// runSuite deploys the exporter and the workloads on the target's node and runs every
// assertion against it.
func runSuite(t *testing.T, ctx context.Context, tg *target, root, work, exporterRef string) {
	start := time.Now()
	work = filepath.Join(work, tg.layout.Name)
	must(t, os.MkdirAll(work, 0o755))
	deployAndMonitor(t, ctx, tg, root, work, exporterRef)
	// The exporter first, as on a node it watches: the OOM pod's kill comes some 20 s after its
	// start, and a kill before the exporter's first look is in no container's counter it can
	// read (only in the pod's hierarchical count, which repeats its containers').
	waitExporterScraped(t, ctx, tg)

	// The workloads, then the static pod.
	applyWorkloads(t, ctx, tg, root, work, nil)
	b, err := os.ReadFile(filepath.Join(root, "test", "kubenode", "testdata", "pods", "static-sleeper.yaml"))
	must(t, err)
	must(t, tg.Node.AddStaticPod(ctx, "static-sleeper.yaml", b))
	exporterPod := waitRunning(t, ctx, tg, 9)
	t.Logf("all pods running %s after the exporter's deployment", time.Since(start).Round(time.Second))

	// In-place resize of the GC-storm JVM's and the Go program's CPU limits.
	exporterURL := fmt.Sprintf("http://%s:10137/metrics", exporterPod.Status.PodIP)
	checkResize(t, ctx, tg, exporterURL)
	if tg.afterResize != nil {
		tg.afterResize(t)
	}

	// Alerts: each planted problem once, with the kubelet's names; nothing from calm pods.
	waitAlerts(t, ctx, tg)
	t.Logf("alerts checked %s after the exporter's deployment", time.Since(start).Round(time.Second))
	checkNames(t, ctx, tg)
	checkOOMOnce(t, ctx, tg)
	checkDiagnose(t, ctx, tg, exporterPod.Metadata.Name)
	// The Helm chart, installed beside the kustomize DaemonSet on the same node.
	checkChart(t, ctx, tg, root, work, exporterRef)
	t.Logf("%s: suite took %s", tg.layout.Name, time.Since(start).Round(time.Second))
}

// deployAndMonitor deploys the exporter (once per cluster) and starts Prometheus and
// Alertmanager with the PodMonitor's job for t (they stop when t ends).
func deployAndMonitor(t *testing.T, ctx context.Context, tg *target, root, work, exporterRef string) {
	must(t, os.MkdirAll(work, 0o755))
	if tg.podMonitor == nil {
		// The exporter as users deploy it: examples/kubernetes with the image replaced.
		rendered := deployExporter(t, ctx, tg, root, work, exporterRef)
		for _, doc := range strings.Split(rendered, "\n---\n") {
			var obj map[string]any
			if yaml.Unmarshal([]byte(doc), &obj) == nil && obj["kind"] == "PodMonitor" {
				tg.podMonitor = obj
			}
		}
		if tg.podMonitor == nil {
			fatal(t, "examples/kubernetes renders no PodMonitor")
		}
	}
	tg.mon = startMonitoring(t, ctx, root, filepath.Join(work, "monitoring"), scrapeConfig(t, tg.podMonitor, tg.ControlPlane, tg.scrapeTimeout))
}

// deployExporter applies examples/kubernetes through an overlay that only replaces the image and
// leaves out the two objects whose CRDs only the Prometheus Operator installs (the PodMonitor
// becomes Prometheus' scrape job instead). It returns the rendered base.
func deployExporter(t *testing.T, ctx context.Context, tg *target, root, work, image string) string {
	overlay := filepath.Join(work, "overlay")
	base := filepath.Join(overlay, "base")
	must(t, os.MkdirAll(overlay, 0o755))
	cp := exec.Command("cp", "-r", filepath.Join(root, "examples", "kubernetes"), base)
	if out, err := cp.CombinedOutput(); err != nil {
		fatalf(t, "cp: %v: %s", err, out)
	}
	kust := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - base
images:
  - name: ghcr.io/quota-exporter/quota-exporter
    newName: %s
    newTag: %s
patches:
  - patch: |
      $patch: delete
      apiVersion: monitoring.coreos.com/v1
      kind: PodMonitor
      metadata: {name: quota-exporter, namespace: monitoring}
  - patch: |
      $patch: delete
      apiVersion: monitoring.coreos.com/v1
      kind: PrometheusRule
      metadata: {name: quota-exporter, namespace: monitoring}
`, strings.SplitN(image, ":", 2)[0], strings.SplitN(image, ":", 2)[1])
	if tg.exporterCPU != "" {
		kust += fmt.Sprintf(`  - target: {kind: DaemonSet, name: quota-exporter}
    patch: |
      - op: replace
        path: /spec/template/spec/containers/0/resources/limits/cpu
        value: %q
`, tg.exporterCPU)
	}
	for _, a := range tg.exporterArgs {
		kust += fmt.Sprintf(`  - target: {kind: DaemonSet, name: quota-exporter}
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: %q
`, a)
	}
	must(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kust), 0o644))
	rendered, err := tg.Kubectl(ctx, "kustomize", base)
	must(t, err)
	_, err = tg.Kubectl(ctx, "create", "namespace", "monitoring")
	must(t, err)
	out, err := tg.Kubectl(ctx, "apply", "-k", overlay)
	if err != nil {
		fatalf(t, "kubectl apply -k: %v", err)
	}
	t.Logf("kubectl apply -k examples/kubernetes (overlay):\n%s", out)
	return rendered
}

// pod is the part of a Pod object the test reads.
type pod struct {
	Metadata struct {
		Name, Namespace, UID string
		Annotations          map[string]string
	}
	Spec struct {
		NodeName         string
		RuntimeClassName string
	}
	Status struct {
		Phase                 string
		PodIP                 string
		ContainerStatuses     []containerStatus
		InitContainerStatuses []containerStatus
	}
}

type containerStatus struct {
	Name         string
	ContainerID  string
	RestartCount int
	Ready        bool
	LastState    struct {
		Terminated *struct {
			Reason      string
			ContainerID string
		}
	}
}

// pods are the pods bound to the target's node.
func pods(t *testing.T, ctx context.Context, tg *target) []pod {
	var list struct{ Items []pod }
	must(t, tg.GetJSON(ctx, &list, "get", "pods", "--all-namespaces", "--field-selector=spec.nodeName="+tg.Node.Name()))
	return list.Items
}

// waitExporterScraped waits until Prometheus has scraped the node's exporter.
func waitExporterScraped(t *testing.T, ctx context.Context, tg *target) {
	limit := tg.scale(3 * time.Minute)
	start := time.Now()
	for {
		res, err := tg.mon.prom.Query(ctx, `up{job="quota-exporter"} == 1`)
		if err == nil && len(res) > 0 {
			t.Logf("exporter scraped %s after its deployment", time.Since(start).Round(time.Second))
			return
		}
		if time.Since(start) > limit {
			out, _ := tg.Kubectl(ctx, "-n", "monitoring", "get", "pods", "-o", "wide")
			fatalf(t, "the exporter was not scraped within %s (%v)\n%s", limit, err, out)
		}
		time.Sleep(2 * time.Second)
	}
}

// waitRunning waits until at least min pods run on the node with all containers ready, the OOM
// pod's after its restart (its kill comes some 20 s after its start: the checks that follow
// see one settled tree), and returns the exporter's pod.
func waitRunning(t *testing.T, ctx context.Context, tg *target, min int) pod {
	limit := tg.scale(4 * time.Minute)
	deadline := time.Now().Add(limit)
	for {
		var exporter *pod
		var waiting []string
		ps := pods(t, ctx, tg)
		for i, p := range ps {
			if p.Metadata.Namespace == "monitoring" {
				exporter = &ps[i]
			}
			ready := p.Status.Phase == "Running"
			for _, c := range p.Status.ContainerStatuses {
				ready = ready && c.Ready && (p.Metadata.Namespace != ns || p.Metadata.Name != "oom" || c.RestartCount > 0)
			}
			if !ready {
				waiting = append(waiting, p.Metadata.Namespace+"/"+p.Metadata.Name+":"+p.Status.Phase)
			}
		}
		if exporter != nil && len(waiting) == 0 && len(ps) >= min {
			return *exporter
		}
		if time.Now().After(deadline) {
			out, _ := tg.Kubectl(ctx, "get", "events", "--all-namespaces")
			fatalf(t, "pods not running within %s: %v (%d pods)\nevents:\n%s", limit, waiting, len(ps), runner.Tail(out, 6000))
		}
		time.Sleep(2 * time.Second)
	}
}

// checkResize raises the CPU limits of the GC-storm JVM and the Go program in place, waits until
// the kernel's files show them (the container's cgroup and its pod's), and requires the first
// scrape after that to show them: the container's own limit, its binding limit, and the JVM's
// GC threads and the Go program's GOMAXPROCS (which the running processes keep), so that the
// comparisons change within one scrape of the resize.
func checkResize(t *testing.T, ctx context.Context, tg *target, url string) {
	resizes := tg.resizes
	if resizes == nil {
		resizes = defaultResizes
	}
	want := map[string]float64{}
	for _, r := range resizes {
		want[r.container] = r.cores
	}
	ids := map[string]string{}
	for _, p := range pods(t, ctx, tg) {
		for _, cs := range p.Status.ContainerStatuses {
			if _, ok := want[cs.Name]; ok && p.Metadata.Namespace == ns {
				ids[cs.Name] = node.BareID(cs.ContainerID)
			}
		}
	}
	start := time.Now()
	for _, r := range resizes {
		patch := fmt.Sprintf(`{"spec":{"containers":[{"name":%q,"resources":{"limits":{"cpu":%q}}}]}}`, r.container, r.cpu)
		out, err := tg.Kubectl(ctx, "-n", ns, "patch", "pod", r.pod, "--subresource", "resize", "--type", "strategic", "-p", patch)
		if err != nil {
			fatalf(t, "resize %s: %v", r.pod, err)
		}
		t.Logf("resize: %s", out)
	}
	limit := tg.scale(90 * time.Second)
	deadline := start.Add(limit)
	for len(want) > 0 {
		for c, cores := range want {
			kernel, err := kernelCPULimit(ctx, tg, ids[c])
			if err != nil || kernel != cores {
				continue
			}
			applied := time.Since(start)
			// The first scrape that starts after the kernel had it: a scrape joins the
			// collection already under way for another (Prometheus's), which may have read the
			// old limit, and a walk is shared for 500 ms (cgroups.DiscoveryMaxAge). So the
			// walk's age passes, and one scrape ends the collection under way.
			time.Sleep(time.Second)
			if _, err := scrapeExporter(ctx, url); err != nil {
				errorf(t, "resize: scrape: %v", err)
				return
			}
			fams, incomplete, err := completeScrape(ctx, url, 5)
			if err != nil {
				errorf(t, "resize: scrape: %v", err)
				return
			}
			if incomplete > 0 {
				t.Logf("resize: %d scrape(s) after the kernel had %s's new limit missed inputs (read time bounds); the next complete one is checked", incomplete, c)
			}
			delete(want, c)
			lim := fams.value("quota_cpu_limit_cores", ns, "", c)
			eff := fams.value("quota_cpu_binding_limit_cores", ns, "", c)
			other := "quota_go_gomaxprocs"
			if c == "gc-storm" {
				other = "quota_jvm_gc_parallel_threads"
			}
			v := fams.value(other, ns, "", c)
			if lim != cores || eff != cores {
				errorf(t, "resize: the kernel had %s's new limit %.2g %s after the patch; the next scrape showed limit %.2g, binding %.2g", c, cores, applied.Round(time.Millisecond), lim, eff)
				continue
			}
			if v <= 0 {
				errorf(t, "resize: the scrape with %s's new limit %.2g has no %s", c, cores, other)
			}
			t.Logf("resize: %s limit %.2g (binding %.2g) and %s %.0f in the first complete scrape after the kernel had it (%s after the patch)", c, lim, eff, other, v, applied.Round(time.Millisecond))
		}
		if len(want) > 0 && time.Now().After(deadline) {
			errorf(t, "resize: the kubelet did not apply the new limits to the kernel within %s (left: %v)", limit, want)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// completeScrape is the first of at most n scrapes in which every collector read all its input
// (quota_exporter_scrape_collector_success 1): under emulation reads can pass their time bound,
// and the exporter then leaves those inputs out of that scrape, as it should. incomplete counts
// the scrapes before it; after n the last one is returned.
func completeScrape(ctx context.Context, url string, n int) (fams families, incomplete int, err error) {
	for i := 0; i < n; i++ {
		if fams, err = scrapeExporter(ctx, url); err != nil {
			return nil, incomplete, err
		}
		ok := true
		for _, m := range fams["quota_exporter_scrape_collector_success"].GetMetric() {
			ok = ok && m.GetGauge().GetValue() == 1
		}
		if ok {
			return fams, incomplete, nil
		}
		incomplete++
	}
	return fams, incomplete, nil
}

// kernelCPULimit reads the CPU limit (cores, -1 for none) that binds a container from the
// kernel's files on the node: the smaller of its cgroup's and its pod's.
func kernelCPULimit(ctx context.Context, tg *target, id string) (float64, error) {
	out, err := tg.Node.Exec(ctx, "find", tg.layout.CPURoot, "-type", "d", "-name", "*"+id+"*")
	if err != nil {
		return 0, err
	}
	dirs := strings.Fields(out)
	if len(dirs) == 0 {
		return 0, fmt.Errorf("no cgroup of container %s under %s", id, tg.layout.CPURoot)
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) < len(dirs[j]) })
	dir := dirs[0] // crun's subgroup is below the container's scope
	var files []string
	ds := []string{dir, filepath.Dir(dir)}
	for _, d := range ds {
		if tg.layout.V2 {
			files = append(files, d+"/cpu.max")
		} else {
			files = append(files, d+"/cpu.cfs_quota_us", d+"/cpu.cfs_period_us")
		}
	}
	out, err = tg.Node.Exec(ctx, append([]string{"cat"}, files...)...)
	if err != nil {
		return 0, err
	}
	if tg.layout.V2 {
		// crun on containerd: the container's limit is its "container" subgroup's, which the
		// kubelet updates after the pod's cgroup.
		sub, _ := tg.Node.Exec(ctx, "sh", "-c", "cat "+dir+"/container/cpu.max 2>/dev/null; true")
		out += " " + sub
	}
	f := strings.Fields(out)
	cores := -1.0
	for i := 0; i+1 < len(f); i += 2 {
		quota, err1 := strconv.ParseFloat(f[i], 64)
		period, err2 := strconv.ParseFloat(f[i+1], 64)
		if err1 != nil || err2 != nil || quota < 0 || period <= 0 { // "max" (v2) or -1 (v1): no limit
			continue
		}
		if c := quota / period; cores < 0 || c < cores {
			cores = c
		}
	}
	return cores, nil
}

// waitAlerts waits for every planted alert at the webhook, then watches a while longer so
// that a duplicate or a calm pod's alert would show.
func waitAlerts(t *testing.T, ctx context.Context, tg *target) {
	mon := tg.mon
	limit := tg.scale(5 * time.Minute)
	deadline := time.Now().Add(limit)
	for {
		missing := missingAlerts(tg.planted(), mon.webhook.Alerts())
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			active, _ := mon.prom.Alerts(ctx)
			errorf(t, "alerts not received within %s: %v\nPrometheus has: %+v", limit, missing, active)
			break
		}
		time.Sleep(2 * time.Second)
	}
	time.Sleep(20 * time.Second)
	firing := map[string]int{}
	for _, a := range mon.webhook.Alerts() {
		if a.Status != "firing" {
			continue
		}
		l := a.Labels
		if l["namespace"] != ns && !strings.HasPrefix(l["cgroup"], tg.layout.Kubepods) {
			continue // this shared host's other cgroups
		}
		// An info notification that later escalates to a warning (GOMAXPROCS idle, then
		// throttled) is two alerts of one problem, each sent once: the severity is in the key.
		key := fmt.Sprintf("%s{severity=%s} %s/%s/%s", l["alertname"], l["severity"], l["namespace"], l["pod"], l["container"])
		firing[key]++
		if l["namespace"] == ns && l["pod"] != "" && l["container"] == "" {
			// No planted problem is a pod's: every container here has limits of its own but
			// the calm pod-level one's. A pod slice alerting is its containers' problem named
			// twice (once while a container is gone between restarts: CrashLoopBackOff).
			errorf(t, "%s fired at the pod slice of %s/%s: %v", l["alertname"], ns, l["pod"], l)
		}
		for _, c := range tg.calm() {
			if l["pod"] == c {
				errorf(t, "calm pod %s fired %s: %v", c, l["alertname"], l)
			}
		}
	}
	for k, c := range firing {
		t.Logf("alert %s: %d notification(s)", k, c)
	}
	for _, p := range tg.planted() {
		for _, severity := range []string{"critical", "warning", "info"} {
			key := fmt.Sprintf("%s{severity=%s} %s/%s/%s", p.alert, severity, ns, p.pod, p.container)
			if firing[key] > 1 {
				// Alertmanager repeats a group only after repeat_interval; more means the alert
				// resolved and fired again, e.g. because its series changed identity.
				errorf(t, "%s notified %d times", key, firing[key])
			}
		}
	}
}

func missingAlerts(planted []plantedProblem, got []stack.Received) []string {
	var missing []string
	for _, p := range planted {
		found := false
		for _, a := range got {
			l := a.Labels
			if a.Status == "firing" && l["alertname"] == p.alert && l["namespace"] == ns && l["pod"] == p.pod && l["container"] == p.container {
				found = true
			}
		}
		if !found {
			missing = append(missing, p.alert+" "+p.pod+"/"+p.container)
		}
	}
	return missing
}

// checkNames: every series under the node's kubepods cgroup names namespace, pod and container
// as the API does for that pod UID and container id; every container of the API has series,
// each in one cgroup only (crun's subgroup is not a second container); each pod's own series
// (container_id="") from one cgroup only (CRI-O's conmon scopes are not the pod); and the series of pod
// sandboxes say container="POD", as cAdvisor's do on CRI-O, so that queries can tell them from
// the pod's own cgroup (container="") and from containers.
func checkNames(t *testing.T, ctx context.Context, tg *target) {
	type ident struct{ ns, pod, container string }
	byUID := map[string]pod{}
	byID := map[string]ident{}
	running := map[string]ident{} // containers that run now: each must have series
	for _, p := range pods(t, ctx, tg) {
		uid := p.Metadata.UID
		if h := p.Metadata.Annotations["kubernetes.io/config.mirror"]; h != "" {
			uid = h // a static pod's cgroup and log directory carry its config hash, not the mirror's UID
		}
		byUID[strings.ReplaceAll(uid, "-", "")] = p
		for _, cs := range append(append([]containerStatus{}, p.Status.ContainerStatuses...), p.Status.InitContainerStatuses...) {
			for _, id := range []string{cs.ContainerID, lastID(cs)} {
				if id != "" {
					byID[id] = ident{p.Metadata.Namespace, p.Metadata.Name, cs.Name} // <runtime>://<id>, as the container_id label
				}
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.ContainerID != "" && cs.Ready {
				running[cs.ContainerID] = ident{p.Metadata.Namespace, p.Metadata.Name, cs.Name}
			}
		}
	}
	sandboxList, err := tg.Node.SandboxIDs(ctx)
	must(t, err)
	sandboxes := map[string]bool{}
	for _, id := range sandboxList {
		sandboxes[tg.layout.IDPrefix()+id] = true
	}
	// The exporter's own series (recording rules' names have colons and aggregate names away).
	res, err := tg.mon.prom.Query(ctx, fmt.Sprintf(`count by (cgroup, namespace, pod, container, pod_uid, container_id) ({job="quota-exporter", __name__=~"quota_[a-z_]+", cgroup=~%q})`, regexp.QuoteMeta(tg.layout.Kubepods)+".*"))
	must(t, err)
	if len(res) == 0 {
		fatalf(t, "no series under %s", tg.layout.Kubepods)
	}
	cgroupsOf := map[string]map[string]bool{} // container id -> cgroups
	podOwn := map[string]map[string]bool{}    // pod UID -> cgroups exported as the pod's own (no container id)
	var sandboxSeries int
	for _, s := range res {
		l := s.Labels
		if l["pod_uid"] == "" {
			if l["pod"] != "" || l["container"] != "" {
				errorf(t, "series without pod_uid but with names: %v", l)
			}
			if podCgroup.MatchString(l["cgroup"]) {
				errorf(t, "series of a pod's cgroup without pod_uid: %v", l)
			}
			continue // kubepods, its QoS levels
		}
		p, ok := byUID[strings.ReplaceAll(l["pod_uid"], "-", "")]
		if !ok {
			errorf(t, "series of an unknown pod UID: %v", l)
			continue
		}
		if l["namespace"] != p.Metadata.Namespace || l["pod"] != p.Metadata.Name {
			errorf(t, "series %v: the API says %s/%s", l, p.Metadata.Namespace, p.Metadata.Name)
		}
		id := l["container_id"]
		if id == "" {
			if l["container"] != "" {
				errorf(t, "series of the pod's own cgroup with a container name: %v", l)
			}
			// One cgroup per pod is the pod's own: not a runtime's monitor (CRI-O's conmon scope).
			if podOwn[l["pod_uid"]] == nil {
				podOwn[l["pod_uid"]] = map[string]bool{}
			}
			podOwn[l["pod_uid"]][l["cgroup"]] = true
			continue
		}
		if cgroupsOf[id] == nil {
			cgroupsOf[id] = map[string]bool{}
		}
		cgroupsOf[id][l["cgroup"]] = true
		switch c, known := byID[id]; {
		case known && l["container"] != c.container:
			errorf(t, "series %v: the API says container %q", l, c.container)
		case sandboxes[id]:
			sandboxSeries++
			if l["container"] != "POD" {
				errorf(t, "series of pod %s/%s's sandbox with container=%q, want \"POD\": %v", l["namespace"], l["pod"], l["container"], l)
			}
		case !known:
			errorf(t, "series of a container id that is neither a container of the API nor a sandbox: %v", l)
		}
	}
	for uid, cgs := range podOwn {
		if len(cgs) > 1 {
			errorf(t, "pod %s exported as its own (container_id=\"\") from %d cgroups: %v", uid, len(cgs), sortedKeys(cgs))
		}
	}
	for id, cgs := range cgroupsOf {
		if len(cgs) > 1 {
			errorf(t, "container %s (%v) exported from %d cgroups: %v", id, byID[id], len(cgs), sortedKeys(cgs))
		}
	}
	// A cgroup below a container's is the container's (crun's subgroup, a tenant's own
	// cgroups, whatever their names): never exported on its own.
	for _, s := range res {
		for _, cgs := range cgroupsOf {
			for cg := range cgs {
				if strings.HasPrefix(s.Labels["cgroup"], cg+"/") {
					errorf(t, "series of a cgroup below container cgroup %s: %v", cg, s.Labels)
				}
			}
		}
	}
	for id, c := range running {
		if cgroupsOf[id] == nil {
			errorf(t, "running container %s/%s/%s (%s) has no series", c.ns, c.pod, c.container, id)
		}
	}
	t.Logf("%d series sets under %s checked: %d containers of %d pods, %d sandbox series", len(res), tg.layout.Kubepods, len(cgroupsOf), len(byUID), sandboxSeries)
}

// podCgroup matches a cgroup path at or below a pod's: pod<uid> with the UID's dashes, the
// systemd driver's underscores, or a static pod's 32 hex digits.
var podCgroup = regexp.MustCompile(`pod[0-9a-f]{8}[-_]?[0-9a-f]{4}[-_]?[0-9a-f]{4}[-_]?[0-9a-f]{4}[-_]?[0-9a-f]{12}([./]|$)`)

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func lastID(cs containerStatus) string {
	if cs.LastState.Terminated != nil {
		return cs.LastState.Terminated.ContainerID
	}
	return ""
}

// checkOOMOnce: the OOM-killed container restarted once, and the exporter counted one kill
// for it, under the container's name (whatever its ids).
func checkOOMOnce(t *testing.T, ctx context.Context, tg *target) {
	res, err := tg.mon.prom.Query(ctx, `sum by (namespace, pod, container) (max_over_time(quota_memory_oom_kills_total{job="quota-exporter", namespace="kubenode", pod="oom"}[1h]))`)
	must(t, err)
	var total float64
	for _, s := range res {
		t.Logf("OOM kills %v: %g", s.Labels, s.Value)
		total += s.Value
	}
	if total != 1 {
		// What the kubelet, the exporter and the kernel have: the container's restarts, every
		// OOM series of the pod over the run, the cgroups whose memory.events count a kill
		// (hierarchical and local) and the container links the names come from.
		var restarts []string
		for _, p := range pods(t, ctx, tg) {
			for _, cs := range p.Status.ContainerStatuses {
				if p.Metadata.Namespace == ns && p.Metadata.Name == "oom" {
					restarts = append(restarts, fmt.Sprintf("%s: %d restart(s), last %+v, now %s", cs.Name, cs.RestartCount, cs.LastState.Terminated, cs.ContainerID))
				}
			}
		}
		series, _ := tg.mon.prom.Query(ctx, `max_over_time(quota_memory_oom_kills_total{job="quota-exporter", cgroup=~".*pod(`+oomPodUID(t, ctx, tg)+`).*"}[1h])`)
		var kept []string
		for _, s := range series {
			kept = append(kept, fmt.Sprintf("%s{%s/%s %s}=%g", filepath.Base(s.Labels["cgroup"]), s.Labels["pod"], s.Labels["container"], s.Labels["container_id"], s.Value))
		}
		out, _ := tg.Node.Exec(ctx, "sh", "-c", "for d in $(find "+tg.layout.CPURoot+tg.layout.Kubepods+
			" -name memory.events | xargs -r grep -l 'oom_kill [1-9]' | xargs -r dirname); do echo \"$(basename $d): $(grep oom_kill $d/memory.events) (local: $(grep oom_kill $d/memory.events.local))\"; done; ls /var/log/containers | grep '^oom_'")
		errorf(t, "OOM kills counted for kubenode/oom: %g, want 1\nkubelet: %s\nexporter's series over the run: %v\nkernel:\n%s", total, strings.Join(restarts, "; "), kept, out)
	}
}

// oomPodUID is a regular expression of the OOM pod's UID as cgroup names write it: with the
// dashes (cgroupfs) or the systemd driver's underscores.
func oomPodUID(t *testing.T, ctx context.Context, tg *target) string {
	for _, p := range pods(t, ctx, tg) {
		if p.Metadata.Namespace == ns && p.Metadata.Name == "oom" {
			return p.Metadata.UID + "|" + strings.ReplaceAll(p.Metadata.UID, "-", "_")
		}
	}
	return "no-oom-pod"
}

// checkDiagnose runs `quota_exporter diagnose` inside the exporter's pod with the DaemonSet's
// paths and requires it to name each planted problem's pod and container.
func checkDiagnose(t *testing.T, ctx context.Context, tg *target, exporterPod string) {
	out, err := tg.Kubectl(ctx, "-n", "monitoring", "exec", exporterPod, "--", "/bin/quota_exporter", "diagnose",
		"--path.procfs=/host/proc", "--path.sysfs=/host/sys", "--path.podlogs=/host/var/log",
		"--format=json", "--duration=10s")
	if err != nil && !strings.Contains(err.Error(), "exit status") {
		fatalf(t, "diagnose in the exporter's pod: %v", err)
	}
	var report struct {
		Findings []map[string]any `json:"findings"`
	}
	// Exit status 1 or 2 means findings; kubectl appends "command terminated with exit code N".
	if i := strings.Index(out, "{"); i >= 0 {
		json.NewDecoder(strings.NewReader(out[i:])).Decode(&report)
	}
	if len(report.Findings) == 0 {
		if strings.Contains(out, "exit code 137") {
			// Seen once here (containerd logged a TaskOOM in that second): diagnose builds a second
			// set of collectors in the exporter's container,
			// and both together passed the DaemonSet's 192Mi memory limit on this busy host.
			errorf(t, "diagnose was killed (SIGKILL, exit 137: the container's OOM kill) in the exporter's pod:\n%s", runner.Tail(out, 2000))
			return
		}
		errorf(t, "diagnose in the pod found nothing:\n%s", runner.Tail(out, 4000))
		return
	}
	text := out
	for _, p := range tg.planted() {
		if p.alert == "QuotaContainerOOMKilled" {
			continue // the OOM kill is history; diagnose judges the live window
		}
		if !strings.Contains(text, p.pod) || !strings.Contains(text, p.container) {
			errorf(t, "diagnose does not name %s/%s/%s", ns, p.pod, p.container)
		}
	}
	t.Logf("diagnose in the exporter's pod: %d findings", len(report.Findings))
}
