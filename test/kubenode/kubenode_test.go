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
	"sort"
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
var planted = []struct{ alert, pod, container string }{
	{"QuotaJVMGCThreadsExceedCPULimit", "jvm-gc-storm", "gc-storm"},
	{"QuotaGoMaxProcsExceedsCPULimit", "go-gomaxprocs", "gomaxprocs"},
	{"QuotaMallocArenaBloat", "rss-creep", "creep"},
	{"QuotaContainerOOMKilled", "oom", "oom"},
}

// calm pods must fire nothing.
var calm = []string{"jvm-healthy", "go-healthy", "two-containers", "pod-level", "static-sleeper-quota-kubenode"}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
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
	for _, c := range []string{"containerd", "runc", "ctr", "etcd", "gcc", "javac", "ldd", "unshare", "nsenter", "ip", "/bin/busybox", "/usr/lib/cni/bridge"} {
		_, err := exec.LookPath(c)
		testenv.Require(t, err == nil, c+" not found (make deps-apt installs containerd, runc, etcd-server, busybox-static and containernetworking-plugins)")
	}
	_, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
	testenv.Require(t, err == nil, "needs the cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu (this harness runs the kubelet on v1)")
}

// TestKubeNode runs the exporter as examples/kubernetes deploys it on a real node (kubelet,
// containerd, runc, API server) beside real workloads, scraped by Prometheus the way the
// PodMonitor says, and checks names, OOM counting, in-place resize, alerts, diagnose and the Helm chart.
func TestKubeNode(t *testing.T) {
	prerequisites(t)
	root := testenv.RepoRoot()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()

	// Binaries and images.
	t0 := time.Now()
	bin, err := node.BuildKubernetes(ctx, filepath.Join(root, "test", "kubenode", "k8sbuild"), t.Logf)
	must(t, err)
	t.Logf("Kubernetes binaries ready in %s: %s", time.Since(t0).Round(time.Millisecond), bin)
	work := t.TempDir()
	t0 = time.Now()
	pause := pauseImage(t, work)
	workloads := workloadsImage(t, root, work)
	// make test-kubenode passes make image's tarball; `go test` alone builds the same image here.
	exporterArchive, exporterImageRef := os.Getenv("KUBENODE_EXPORTER_IMAGE"), os.Getenv("KUBENODE_EXPORTER_REF")
	var exporter node.Image
	if exporterArchive == "" {
		exporter = exporterImage(t, root, work)
		exporterImageRef = exporter.Ref
	}
	t.Logf("images built in %s", time.Since(t0).Round(time.Millisecond))

	// The node; torn down on return, on SIGINT/SIGTERM, and by the next run after a crash.
	t0 = time.Now()
	n, err := node.Start(ctx, node.Options{Bin: bin, PauseImage: pause, Logf: t.Logf})
	must(t, err)
	stopOnce := make(chan struct{})
	defer func() {
		close(stopOnce)
		if t.Failed() {
			for _, c := range []string{"kubelet", "containerd"} {
				b, _ := os.ReadFile(n.LogPath(c))
				t.Logf("%s log (tail):\n%s", c, runner.Tail(string(b), 4000))
			}
		}
		n.Stop()
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			n.Stop()
			os.Exit(1)
		case <-stopOnce:
		}
	}()
	t.Logf("node up in %s", time.Since(t0).Round(time.Millisecond))
	if exporterArchive != "" {
		must(t, n.ImportArchive(ctx, exporterArchive))
		t.Logf("imported %s (%s)", exporterArchive, exporterImageRef)
		importImages(t, ctx, n, workloads)
	} else {
		importImages(t, ctx, n, exporter, workloads)
	}

	// The exporter as users deploy it: examples/kubernetes with the image replaced.
	rendered := deployExporter(t, ctx, n, root, work, exporterImageRef)
	var podMonitor map[string]any
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var obj map[string]any
		if yaml.Unmarshal([]byte(doc), &obj) == nil && obj["kind"] == "PodMonitor" {
			podMonitor = obj
		}
	}
	if podMonitor == nil {
		t.Fatal("examples/kubernetes renders no PodMonitor")
	}
	mon := startMonitoring(t, ctx, root, filepath.Join(work, "monitoring"), scrapeConfig(t, podMonitor, n))

	// The workloads, then the static pod.
	_, err = n.Kubectl(ctx, "apply", "-f", filepath.Join(root, "test", "kubenode", "testdata", "pods", "workloads.yaml"))
	must(t, err)
	b, err := os.ReadFile(filepath.Join(root, "test", "kubenode", "testdata", "pods", "static-sleeper.yaml"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(n.ManifestDir(), "static-sleeper.yaml"), b, 0o644))
	exporterPod := waitRunning(t, ctx, n)
	t.Logf("all pods running %s after the start", time.Since(start).Round(time.Second))

	// In-place resize of the GC-storm JVM's and the Go program's CPU limits.
	exporterURL := fmt.Sprintf("http://%s:10137/metrics", exporterPod.Status.PodIP)
	checkResize(t, ctx, n, exporterURL)

	// Alerts: each planted problem once, with the kubelet's names; nothing from calm pods.
	waitAlerts(t, ctx, mon)
	checkNames(t, ctx, n, mon)
	checkOOMOnce(t, ctx, mon)
	checkDiagnose(t, ctx, n, exporterPod.Metadata.Name)
	// The Helm chart, installed beside the kustomize DaemonSet on the same node.
	checkChart(t, ctx, n, root, work, exporterImageRef)
	t.Logf("TestKubeNode took %s", time.Since(start).Round(time.Second))
}

// deployExporter applies examples/kubernetes through an overlay that only replaces the image and
// leaves out the two objects whose CRDs only the Prometheus Operator installs (the PodMonitor
// becomes Prometheus' scrape job instead). It returns the rendered base.
func deployExporter(t *testing.T, ctx context.Context, n *node.Node, root, work, image string) string {
	overlay := filepath.Join(work, "overlay")
	base := filepath.Join(overlay, "base")
	must(t, os.MkdirAll(overlay, 0o755))
	cp := exec.Command("cp", "-r", filepath.Join(root, "examples", "kubernetes"), base)
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
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
	must(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kust), 0o644))
	rendered, err := n.Kubectl(ctx, "kustomize", base)
	must(t, err)
	_, err = n.Kubectl(ctx, "create", "namespace", "monitoring")
	must(t, err)
	out, err := n.Kubectl(ctx, "apply", "-k", overlay)
	if err != nil {
		t.Fatalf("kubectl apply -k: %v", err)
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

func pods(t *testing.T, ctx context.Context, n *node.Node) []pod {
	var list struct{ Items []pod }
	must(t, n.GetJSON(ctx, &list, "get", "pods", "--all-namespaces"))
	return list.Items
}

// waitRunning waits until every pod runs with all containers ready (the OOM pod may restart
// meanwhile) and returns the exporter's pod.
func waitRunning(t *testing.T, ctx context.Context, n *node.Node) pod {
	deadline := time.Now().Add(4 * time.Minute)
	for {
		var exporter *pod
		var waiting []string
		ps := pods(t, ctx, n)
		for i, p := range ps {
			if p.Metadata.Namespace == "monitoring" {
				exporter = &ps[i]
			}
			ready := p.Status.Phase == "Running"
			for _, c := range p.Status.ContainerStatuses {
				ready = ready && c.Ready
			}
			if !ready {
				waiting = append(waiting, p.Metadata.Namespace+"/"+p.Metadata.Name+":"+p.Status.Phase)
			}
		}
		if exporter != nil && len(waiting) == 0 && len(ps) >= 9 {
			return *exporter
		}
		if time.Now().After(deadline) {
			out, _ := n.Kubectl(ctx, "get", "events", "--all-namespaces")
			t.Fatalf("pods not running within 4m: %v (%d pods)\nevents:\n%s", waiting, len(ps), runner.Tail(out, 6000))
		}
		time.Sleep(2 * time.Second)
	}
}

// checkResize raises the CPU limits of the GC-storm JVM and the Go program in place and
// scrapes the exporter until the new limits show: in that same scrape the container's own
// limit, its binding limit, and the JVM's GC threads and the Go program's GOMAXPROCS (which
// the running processes keep) are all present, so the comparisons change within one scrape.
func checkResize(t *testing.T, ctx context.Context, n *node.Node, url string) {
	for _, r := range []struct{ pod, container, cpu string }{{"jvm-gc-storm", "gc-storm", "600m"}, {"go-gomaxprocs", "gomaxprocs", "1"}} {
		patch := fmt.Sprintf(`{"spec":{"containers":[{"name":%q,"resources":{"limits":{"cpu":%q}}}]}}`, r.container, r.cpu)
		out, err := n.Kubectl(ctx, "-n", ns, "patch", "pod", r.pod, "--subresource", "resize", "--type", "strategic", "-p", patch)
		if err != nil {
			t.Fatalf("resize %s: %v", r.pod, err)
		}
		t.Logf("resize: %s", out)
	}
	want := map[string]float64{"gc-storm": 0.6, "gomaxprocs": 1}
	start := time.Now()
	deadline := start.Add(90 * time.Second)
	for {
		fams, err := scrapeExporter(ctx, url)
		if err == nil {
			done := true
			for c, cores := range want {
				lim := fams.value("quota_cpu_limit_cores", ns, "", c)
				eff := fams.value("quota_cpu_binding_limit_cores", ns, "", c)
				if lim != cores || eff != cores {
					done = false
					continue
				}
				var other string
				if c == "gc-storm" {
					other = "quota_jvm_gc_parallel_threads"
				} else {
					other = "quota_go_gomaxprocs"
				}
				v := fams.value(other, ns, "", c)
				if v <= 0 {
					t.Errorf("resize: the scrape with %s's new limit %.2g has no %s", c, cores, other)
				}
				t.Logf("resize: %s limit %.2g (effective %.2g) and %s %.0f in one scrape, %s after the patch", c, lim, eff, other, v, time.Since(start).Round(time.Millisecond))
				delete(want, c)
			}
			if done && len(want) == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("resize: new limits not scraped within 90s (left: %v, last error %v)", want, err)
			return
		}
		time.Sleep(time.Second)
	}
}

// waitAlerts waits for every planted alert at the webhook, then watches a while longer so
// that a duplicate or a calm pod's alert would show.
func waitAlerts(t *testing.T, ctx context.Context, mon *monitoring) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		missing := missingAlerts(mon.webhook.Alerts())
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			active, _ := mon.prom.Alerts(ctx)
			t.Errorf("alerts not received within 5m: %v\nPrometheus has: %+v", missing, active)
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
		if l["namespace"] != ns && !strings.HasPrefix(l["cgroup"], "/kubepods") {
			continue // this shared host's other cgroups
		}
		// An info notification that later escalates to a warning (GOMAXPROCS idle, then
		// throttled) is two alerts of one problem, each sent once: the severity is in the key.
		key := fmt.Sprintf("%s{severity=%s} %s/%s/%s", l["alertname"], l["severity"], l["namespace"], l["pod"], l["container"])
		firing[key]++
		for _, c := range calm {
			if l["pod"] == c {
				t.Errorf("calm pod %s fired %s: %v", c, l["alertname"], l)
			}
		}
	}
	for k, c := range firing {
		t.Logf("alert %s: %d notification(s)", k, c)
	}
	for _, p := range planted {
		for _, severity := range []string{"critical", "warning", "info"} {
			key := fmt.Sprintf("%s{severity=%s} %s/%s/%s", p.alert, severity, ns, p.pod, p.container)
			if firing[key] > 1 {
				// Alertmanager repeats a group only after repeat_interval; more means the alert
				// resolved and fired again, e.g. because its series changed identity.
				t.Errorf("%s notified %d times", key, firing[key])
			}
		}
	}
}

func missingAlerts(got []stack.Received) []string {
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

// checkNames: every series under /kubepods names namespace, pod and container as the API
// does for that pod UID and container id; the series of pod sandboxes are reported.
func checkNames(t *testing.T, ctx context.Context, n *node.Node, mon *monitoring) {
	type ident struct{ ns, pod, container string }
	byUID := map[string]pod{}
	byID := map[string]ident{}
	for _, p := range pods(t, ctx, n) {
		uid := p.Metadata.UID
		if h := p.Metadata.Annotations["kubernetes.io/config.mirror"]; h != "" {
			uid = h // a static pod's cgroup and log directory carry its config hash, not the mirror's UID
		}
		byUID[uid] = p
		for _, cs := range append(append([]containerStatus{}, p.Status.ContainerStatuses...), p.Status.InitContainerStatuses...) {
			for _, id := range []string{cs.ContainerID, lastID(cs)} {
				if id != "" {
					byID[id] = ident{p.Metadata.Namespace, p.Metadata.Name, cs.Name} // containerd://<id>, as the container_id label
				}
			}
		}
	}
	// The exporter's own series (recording rules' names have colons and aggregate names away).
	res, err := mon.prom.Query(ctx, `count by (cgroup, namespace, pod, container, pod_uid, container_id) ({job="quota-exporter", __name__=~"quota_[a-z_]+", cgroup=~"/kubepods.*"})`)
	must(t, err)
	if len(res) == 0 {
		t.Fatal("no series under /kubepods")
	}
	var sandboxes []string
	for _, s := range res {
		l := s.Labels
		uid := strings.ReplaceAll(l["pod_uid"], "-", "")
		var p *pod
		for u, q := range byUID {
			if strings.ReplaceAll(u, "-", "") == uid {
				q := q
				p = &q
			}
		}
		if l["pod_uid"] == "" {
			if l["pod"] != "" || l["container"] != "" {
				t.Errorf("series without pod_uid but with names: %v", l)
			}
			continue // kubepods, its QoS levels
		}
		if p == nil {
			t.Errorf("series of an unknown pod UID: %v", l)
			continue
		}
		if l["namespace"] != p.Metadata.Namespace || l["pod"] != p.Metadata.Name {
			t.Errorf("series %v: the API says %s/%s", l, p.Metadata.Namespace, p.Metadata.Name)
		}
		if l["container_id"] == "" {
			continue // the pod's own cgroup
		}
		if id, ok := byID[l["container_id"]]; ok {
			if l["container"] != id.container {
				t.Errorf("series %v: the API says container %q", l, id.container)
			}
		} else {
			sandboxes = append(sandboxes, fmt.Sprintf("%s/%s container=%q (%s)", l["namespace"], l["pod"], l["container"], l["container_id"]))
		}
	}
	sort.Strings(sandboxes)
	t.Logf("%d /kubepods series sets checked; cgroups whose id is no container of the API (pod sandboxes): %d\n%s", len(res), len(sandboxes), strings.Join(sandboxes, "\n"))
}

func lastID(cs containerStatus) string {
	if cs.LastState.Terminated != nil {
		return cs.LastState.Terminated.ContainerID
	}
	return ""
}

// checkOOMOnce: the OOM-killed container restarted once, and the exporter counted one kill
// for it, under the container's name (whatever its ids).
func checkOOMOnce(t *testing.T, ctx context.Context, mon *monitoring) {
	res, err := mon.prom.Query(ctx, `sum by (namespace, pod, container) (max_over_time(quota_memory_oom_kills_total{job="quota-exporter", namespace="kubenode", pod="oom"}[10m]))`)
	must(t, err)
	var total float64
	for _, s := range res {
		t.Logf("OOM kills %v: %g", s.Labels, s.Value)
		total += s.Value
	}
	if total != 1 {
		t.Errorf("OOM kills counted for kubenode/oom: %g, want 1", total)
	}
}

// checkDiagnose runs `quota_exporter diagnose` inside the exporter's pod with the DaemonSet's
// paths and requires it to name each planted problem's pod and container.
func checkDiagnose(t *testing.T, ctx context.Context, n *node.Node, exporterPod string) {
	out, err := n.Kubectl(ctx, "-n", "monitoring", "exec", exporterPod, "--", "/bin/quota_exporter", "diagnose",
		"--path.procfs=/host/proc", "--path.sysfs=/host/sys", "--path.podlogs=/host/var/log",
		"--format=json", "--duration=10s")
	if err != nil && !strings.Contains(err.Error(), "exit status") {
		t.Fatalf("diagnose in the exporter's pod: %v", err)
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
			t.Errorf("diagnose was killed (SIGKILL, exit 137: the container's OOM kill) in the exporter's pod:\n%s", runner.Tail(out, 2000))
			return
		}
		t.Errorf("diagnose in the pod found nothing:\n%s", runner.Tail(out, 4000))
		return
	}
	text := out
	for _, p := range planted[:3] { // the OOM kill is history; diagnose judges the live window
		if !strings.Contains(text, p.pod) || !strings.Contains(text, p.container) {
			t.Errorf("diagnose does not name %s/%s/%s", ns, p.pod, p.container)
		}
	}
	t.Logf("diagnose in the exporter's pod: %d findings", len(report.Findings))
}
