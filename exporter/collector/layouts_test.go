//go:build linux

package collector

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kubenames"
	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// The node layouts of docs/cgroups.md on real v1 cgroups of this host: the directories carry
// the names the kubelet, containerd, CRI-O and crun give them (v1 takes any name), real
// processes run in them, and the kubelet's log directories are written as the kubelet
// writes them (writeKubeletLogs).

// nodeTree is a tree of real v1 cgroups below one test cgroup.
type nodeTree struct {
	t    *testing.T
	root *testutil.Cgroup
	made map[string]*testutil.Cgroup
}

func newNodeTree(t *testing.T, name string) *nodeTree {
	return &nodeTree{t: t, root: testutil.NewCgroup(t, name, testutil.CgroupOptions{}), made: map[string]*testutil.Cgroup{}}
}

// at returns the cgroup at rel below the root, making each missing level (the last with opts).
func (n *nodeTree) at(rel string, opts testutil.CgroupOptions) *testutil.Cgroup {
	n.t.Helper()
	parent, done := n.root, ""
	segs := strings.Split(rel, "/")
	for i, seg := range segs {
		done = strings.TrimPrefix(done+"/"+seg, "/")
		cg := n.made[done]
		if cg == nil {
			o := testutil.CgroupOptions{}
			if i == len(segs)-1 {
				o = opts
			}
			cg = parent.Child(seg, o)
			n.made[done] = cg
		}
		parent = cg
	}
	return parent
}

// path is rel's cgroup path as the cgroup label carries it (cut beyond 256 bytes).
func (n *nodeTree) path(rel string) string { return tenantstr.Label(n.root.Path + "/" + rel) }

// env is an Env watching only the tree, named by the kubelet's log directories of cs.
func (n *nodeTree) env(cs []testutil.KubeletContainer) *Env {
	n.t.Helper()
	cfg := Config{ProcPath: "/proc", SysPath: "/sys", ThrottleWindow: time.Second,
		CgroupInclude: regexp.MustCompile("^" + regexp.QuoteMeta(n.root.Path) + "(/.*)?$")}
	if cs != nil {
		cfg.PodLogsPath = filepath.Join(n.t.TempDir(), "log")
		testutil.WriteKubeletLogs(n.t, cfg.PodLogsPath, cs...)
	}
	env, err := NewEnv(cfg, discardLogger())
	if err != nil {
		n.t.Fatal(err)
	}
	return env
}

// run starts program (a path) in cg and returns its PID once it runs there as comm.
func run(t *testing.T, cg *testutil.Cgroup, program string, args ...string) int {
	t.Helper()
	cmd := cg.Command(program, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	comm := filepath.Base(program)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if strings.TrimSpace(string(b)) == comm {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start in %s (comm %q)", program, cg.Path, b)
		}
	}
}

// sleeper is sleep(1) under another name (its comm).
func sleeper(t *testing.T, name string) string {
	t.Helper()
	src, err := exec.LookPath("sleep")
	testutil.Require(t, err == nil, "sleep(1) not installed")
	dst := filepath.Join(t.TempDir(), name)
	testutil.CopyFile(t, src, dst, 0o755)
	return dst
}

// scrapeLayout scrapes env with the cpu, memory and process collectors and the discovery
// self-metrics.
func scrapeLayout(t *testing.T, env *Env) map[string]*dto.MetricFamily {
	t.Helper()
	env.Cgroups.Expire()
	env.Cgroups.Snapshot(context.Background()) // the scrape's walk, published before the self-metrics read it
	cs := map[string]Collector{}
	for _, name := range []string{"cpu", "memory", "process"} {
		c, err := registry[name].factory(env)
		if err != nil {
			t.Fatal(err)
		}
		cs[name] = c
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister((&Set{env: env, collectors: cs}).Bind(context.Background()), env.Discovery)
	return testutil.Families(t, reg)
}

// seriesLabels gives each series of a family as its label map.
func seriesLabels(mfs map[string]*dto.MetricFamily, name string) []map[string]string {
	var out []map[string]string
	if mf := mfs[name]; mf != nil {
		for _, m := range mf.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			out = append(out, l)
		}
	}
	return out
}

// processCgroup is the cgroup label quota_process_info gives pid ("" if none).
func processCgroup(mfs map[string]*dto.MetricFamily, pid int) map[string]string {
	for _, l := range seriesLabels(mfs, "quota_process_info") {
		if l["pid"] == strconv.Itoa(pid) {
			return l
		}
	}
	return nil
}

func skipped(mfs map[string]*dto.MetricFamily, reason string) float64 {
	return value(seriesForLabels(mfs, "quota_exporter_cgroups_skipped", "reason", reason))
}

const (
	realIDA  = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
	realIDB  = "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"
	realIDC  = "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3"
	realUIDA = "1a1a1a1a-1111-4111-8111-1a1a1a1a1a1a"
	realUIDB = "2b2b2b2b-2222-4222-8222-2b2b2b2b2b2b"
)

func systemdUID(uid string) string { return strings.ReplaceAll(uid, "-", "_") }

// Issue 29.3: a tenant in container A makes cgroups inside its container named after pod B
// and B's container (the systemd driver's names, and a bare id below a directory of its
// own). They are A's: never exported, their processes are A's, B's names and pod-level series
// come from B's own cgroups only, and the skip is counted.
func TestRealNestedCgroupsAreTheirContainers(t *testing.T) {
	n := newNodeTree(t, "nested")
	podA := "kubepods/burstable/pod" + realUIDA
	podB := "kubepods/burstable/pod" + realUIDB
	ctrA := n.at(podA+"/"+realIDA, testutil.CgroupOptions{QuotaUS: 100000})
	n.at(podA, testutil.CgroupOptions{QuotaUS: 100000})
	ctrB := n.at(podB+"/"+realIDB, testutil.CgroupOptions{QuotaUS: 200000})
	impersonate := podA + "/" + realIDA + "/kubepods-burstable-pod" + systemdUID(realUIDB) + ".slice/cri-containerd-" + realIDB + ".scope"
	bare := podA + "/" + realIDA + "/x/" + realIDB
	sleep := sleeper(t, "sleep")
	pidA := run(t, ctrA, sleep, "600")
	pidImp := run(t, n.at(impersonate, testutil.CgroupOptions{QuotaUS: 10000}), sleep, "600")
	pidBare := run(t, n.at(bare, testutil.CgroupOptions{}), sleep, "600")
	pidB := run(t, ctrB, sleep, "600")
	env := n.env([]testutil.KubeletContainer{
		{Namespace: "tenant-a", Pod: "shell-0", UID: realUIDA, Container: "shell", ID: realIDA},
		{Namespace: "tenant-b", Pod: "api-0", UID: realUIDB, Container: "api", ID: realIDB},
	})
	mfs := scrapeLayout(t, env)

	for name := range mfs {
		for _, l := range seriesLabels(mfs, name) {
			if l["pod_uid"] == realUIDB || strings.Contains(l["container_id"], realIDB) || l["pod"] == "api-0" {
				if c := l["cgroup"]; c != n.path(podB) && c != n.path(podB+"/"+realIDB) {
					t.Errorf("%s: B's identity on %s: %v", name, c, l)
				}
			}
			if strings.HasPrefix(l["cgroup"], n.path(podA+"/"+realIDA+"/")) {
				t.Errorf("%s: a cgroup below container A exported: %v", name, l)
			}
		}
	}
	for _, pid := range []int{pidA, pidImp, pidBare} {
		l := processCgroup(mfs, pid)
		if l["cgroup"] != n.path(podA+"/"+realIDA) || l["container"] != "shell" || l["pod_uid"] != realUIDA {
			t.Errorf("process %d: %v, want container A's labels", pid, l)
		}
	}
	if l := processCgroup(mfs, pidB); l["cgroup"] != n.path(podB+"/"+realIDB) || l["container"] != "api" {
		t.Errorf("B's own process %d: %v", pidB, l)
	}
	// The impersonating slice and scope, x and the bare id: four cgroups below A.
	if got := skipped(mfs, "below_container"); got != 4 {
		t.Errorf("quota_exporter_cgroups_skipped{reason=below_container} = %v, want 4", got)
	}
}

// Issue 30, kind: the kubelet's cgroupRoot /kubelet with the systemd driver
// (/kubelet.slice/kubelet-kubepods.slice/...) and with the cgroupfs driver (/kubelet/kubepods/...):
// containers and pods get their pod UID, QoS class and names.
func TestRealKindLayout(t *testing.T) {
	n := newNodeTree(t, "kind")
	systemdPod := "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + systemdUID(realUIDA) + ".slice"
	cgroupfsPod := "kubelet/kubepods/pod" + realUIDB
	sleep := sleeper(t, "sleep")
	n.at(systemdPod, testutil.CgroupOptions{QuotaUS: 50000})
	run(t, n.at(systemdPod+"/cri-containerd-"+realIDA+".scope", testutil.CgroupOptions{QuotaUS: 50000}), sleep, "600")
	n.at(cgroupfsPod, testutil.CgroupOptions{QuotaUS: 50000})
	run(t, n.at(cgroupfsPod+"/"+realIDB, testutil.CgroupOptions{QuotaUS: 50000}), sleep, "600")
	env := n.env([]testutil.KubeletContainer{
		{Namespace: "shop", Pod: "web-0", UID: realUIDA, Container: "web", ID: realIDA},
		{Namespace: "kube-system", Pod: "etcd-kind-control-plane", UID: realUIDB, Container: "etcd", ID: realIDB},
	})
	mfs := scrapeLayout(t, env)
	for _, c := range []struct{ cgroup, uid, qos, pod, container string }{
		{systemdPod, realUIDA, "burstable", "web-0", ""},
		{systemdPod + "/cri-containerd-" + realIDA + ".scope", realUIDA, "burstable", "web-0", "web"},
		{cgroupfsPod, realUIDB, "guaranteed", "etcd-kind-control-plane", ""},
		{cgroupfsPod + "/" + realIDB, realUIDB, "guaranteed", "etcd-kind-control-plane", "etcd"},
	} {
		m := seriesForLabels(mfs, "quota_cpu_limit_cores", "cgroup", n.path(c.cgroup), "pod_uid", c.uid, "qos_class", c.qos, "pod", c.pod, "container", c.container)
		if value(m) != 0.5 {
			t.Errorf("%s: no limit series with pod_uid %s, qos_class %s, pod %s, container %q: %v", c.cgroup, c.uid, c.qos, c.pod, c.container, seriesLabels(mfs, "quota_cpu_limit_cores"))
		}
	}
}

// Issue 30, CRI-O with crun: the container's processes in crun's "container" subgroup of the
// scope, its limits on both, conmon beside it. The container is exported once, from its
// scope, with the subgroup's processes; conmon never.
func TestRealCrunSubgroupAndConmon(t *testing.T) {
	n := newNodeTree(t, "crun")
	pod := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + systemdUID(realUIDA) + ".slice"
	scope := pod + "/crio-" + realIDA + ".scope"
	sleep := sleeper(t, "sleep")
	n.at(pod, testutil.CgroupOptions{QuotaUS: 50000, MemoryLimit: 256 << 20})
	n.at(scope, testutil.CgroupOptions{QuotaUS: 50000, MemoryLimit: 256 << 20})
	pid := run(t, n.at(scope+"/container", testutil.CgroupOptions{QuotaUS: 50000, MemoryLimit: 256 << 20}), sleep, "600")
	conmon := run(t, n.at(pod+"/crio-conmon-"+realIDA+".scope", testutil.CgroupOptions{}), sleeper(t, "conmon"), "600")
	env := n.env([]testutil.KubeletContainer{{Namespace: "shop", Pod: "cart-0", UID: realUIDA, Container: "cart", ID: realIDA}})
	mfs := scrapeLayout(t, env)

	var limits []string
	for _, l := range seriesLabels(mfs, "quota_cpu_limit_cores") {
		if l["container_id"] == "cri-o://"+realIDA {
			limits = append(limits, l["cgroup"])
		}
	}
	if len(limits) != 1 || limits[0] != n.path(scope) {
		t.Errorf("the container's limit is exported for %v, want once for its scope", limits)
	}
	if l := processCgroup(mfs, pid); l["cgroup"] != n.path(scope) || l["container"] != "cart" {
		t.Errorf("the container's process: %v, want the scope's labels", l)
	}
	for name := range mfs {
		for _, l := range seriesLabels(mfs, name) {
			if strings.Contains(l["cgroup"], "crio-conmon-") || l["pid"] == strconv.Itoa(conmon) {
				t.Errorf("%s: conmon exported: %v", name, l)
			}
		}
	}
	if skipped(mfs, "conmon") != 1 || skipped(mfs, "runtime_subgroup") != 1 || skipped(mfs, "below_container") != 0 {
		t.Errorf("skipped: conmon %v, runtime_subgroup %v, below_container %v; want 1, 1, 0",
			skipped(mfs, "conmon"), skipped(mfs, "runtime_subgroup"), skipped(mfs, "below_container"))
	}
}

// Issue 30, crun with containerd (seen on test/kubenode's v2 node: containerd 1.6, crun 1.8.1,
// systemd driver): crun writes the container's limits only to its "container" subgroup, the
// scope has none. The container, exported once from its scope, has the subgroup's limits, and
// an in-place resize (crun update rewrites the subgroup) shows in the next scrape.
func TestRealCrunContainerdLimitsOnSubgroup(t *testing.T) {
	n := newNodeTree(t, "crunctrd")
	pod := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + systemdUID(realUIDA) + ".slice"
	scope := pod + "/cri-containerd-" + realIDA + ".scope"
	n.at(pod, testutil.CgroupOptions{QuotaUS: 50000, MemoryLimit: 256 << 20})
	n.at(scope, testutil.CgroupOptions{})
	sub := n.at(scope+"/container", testutil.CgroupOptions{QuotaUS: 30000, MemoryLimit: 128 << 20})
	sub.Write("cpu", "cpu.cfs_burst_us", "20000") // 0.2 cores of a 0.1 s period
	run(t, sub, sleeper(t, "sleep"), "600")
	env := n.env([]testutil.KubeletContainer{{Namespace: "shop", Pod: "cart-0", UID: realUIDA, Container: "cart", ID: realIDA}})
	check := func(cores, bytes float64) {
		t.Helper()
		mfs := scrapeLayout(t, env)
		if got := value(seriesFor(mfs, "quota_cpu_limit_cores", n.path(scope))); got != cores {
			t.Errorf("the scope's quota_cpu_limit_cores %v, want the subgroup's %v", got, cores)
		}
		if got := value(seriesFor(mfs, "quota_memory_limit_bytes", n.path(scope))); got != bytes {
			t.Errorf("the scope's quota_memory_limit_bytes %v, want the subgroup's %v", got, bytes)
		}
		if got := value(seriesFor(mfs, "quota_cpu_burst_limit_cores", n.path(scope))); got != 0.2 {
			t.Errorf("the scope's quota_cpu_burst_limit_cores %v, want the subgroup's 0.2", got)
		}
		for _, l := range seriesLabels(mfs, "quota_cpu_limit_cores") {
			if strings.HasSuffix(l["cgroup"], "/container") {
				t.Errorf("crun's subgroup exported: %v", l)
			}
		}
	}
	for range 3 {
		check(0.3, 128<<20)
	}
	sub.Write("cpu", "cpu.cfs_quota_us", "40000")
	check(0.4, 128<<20)
}

// Issue 30, sandboxes: the pod's pause container (containerd: a container cgroup the kubelet
// never links in /var/log/containers, running pause) is exported with container="POD"; a
// container the kubelet has not linked yet (it links after the runtime started it) is not a
// sandbox, and is held back until its link names it: its series carry its name from the
// first, not its pod's alone for a scrape (a label set of its own, which alerts saw).
func TestRealSandboxIsPOD(t *testing.T) {
	n := newNodeTree(t, "sandbox")
	pod := "kubepods/burstable/pod" + realUIDA
	n.at(pod, testutil.CgroupOptions{QuotaUS: 50000})
	run(t, n.at(pod+"/"+realIDC, testutil.CgroupOptions{}), sleeper(t, "pause"), "600")
	run(t, n.at(pod+"/"+realIDA, testutil.CgroupOptions{QuotaUS: 50000}), sleeper(t, "sleep"), "600")
	run(t, n.at(pod+"/"+realIDB, testutil.CgroupOptions{}), sleeper(t, "starting"), "600")
	env := n.env([]testutil.KubeletContainer{{Namespace: "shop", Pod: "web-0", UID: realUIDA, Container: "app", ID: realIDA}})
	mfs := scrapeLayout(t, env)
	check := func(want []struct{ id, container string }) {
		t.Helper()
		for _, c := range want {
			m := seriesForLabels(mfs, "quota_memory_usage_bytes", "cgroup", n.path(pod+"/"+c.id), "namespace", "shop", "pod", "web-0", "container", c.container)
			if m == nil {
				t.Errorf("%s…: no series with namespace shop, pod web-0, container %q: %v", c.id[:8], c.container, seriesLabels(mfs, "quota_memory_usage_bytes"))
			}
		}
	}
	check([]struct{ id, container string }{{realIDC, "POD"}, {realIDA, "app"}})
	for name := range mfs {
		for _, l := range seriesLabels(mfs, name) {
			if l["cgroup"] == n.path(pod+"/"+realIDB) {
				t.Errorf("the unlinked container is exported: %s %v", name, l)
			}
		}
	}
	if got := len(env.Cgroups.Latest().Unlinked); got != 1 {
		t.Errorf("%d containers held back as unlinked, want 1", got)
	}
	// The kubelet links it; the namer looks again after a miss within its miss interval.
	testutil.WriteKubeletLogs(t, env.Config.PodLogsPath, testutil.KubeletContainer{Namespace: "shop", Pod: "web-0", UID: realUIDA, Container: "worker", ID: realIDB})
	time.Sleep(kubenames.DefaultMissInterval + 100*time.Millisecond)
	mfs = scrapeLayout(t, env)
	check([]struct{ id, container string }{{realIDC, "POD"}, {realIDA, "app"}, {realIDB, "worker"}})
}

// Issue 30, in-place resize: the limits of a container and its pod change while the exporter
// runs; the next scrape shows the new ones (after the discovery's cache has settled on the
// old ones: three scrapes first).
func TestRealResizeWithinOneScrape(t *testing.T) {
	n := newNodeTree(t, "resize")
	pod := "kubepods/burstable/pod" + realUIDA
	podCg := n.at(pod, testutil.CgroupOptions{QuotaUS: 50000, MemoryLimit: 64 << 20})
	ctr := n.at(pod+"/"+realIDA, testutil.CgroupOptions{QuotaUS: 50000, MemoryLimit: 64 << 20})
	run(t, ctr, sleeper(t, "sleep"), "600")
	env := n.env(nil)
	for range 3 {
		scrapeLayout(t, env)
	}
	podCg.Write("cpu", "cpu.cfs_quota_us", "100000")
	podCg.Write("memory", "memory.limit_in_bytes", strconv.Itoa(128<<20))
	ctr.Write("cpu", "cpu.cfs_quota_us", "100000")
	ctr.Write("memory", "memory.limit_in_bytes", strconv.Itoa(128<<20))
	mfs := scrapeLayout(t, env)
	for _, p := range []string{pod, pod + "/" + realIDA} {
		if got := value(seriesFor(mfs, "quota_cpu_limit_cores", n.path(p))); got != 1 {
			t.Errorf("%s: quota_cpu_limit_cores %v after the resize, want 1", p, got)
		}
		if got := value(seriesFor(mfs, "quota_memory_limit_bytes", n.path(p))); got != 128<<20 {
			t.Errorf("%s: quota_memory_limit_bytes %v after the resize, want %d", p, got, 128<<20)
		}
	}
}

// Issue 30, long pod names: a pod name of 200 characters makes the kubelet cut the
// container's link name inside the id; the container is named from the link's target.
func TestRealLongPodName(t *testing.T) {
	n := newNodeTree(t, "longname")
	pod := "kubepods/burstable/pod" + realUIDA
	long := "batch-" + strings.Repeat("x", 194)
	n.at(pod, testutil.CgroupOptions{QuotaUS: 50000})
	run(t, n.at(pod+"/"+realIDA, testutil.CgroupOptions{QuotaUS: 50000}), sleeper(t, "sleep"), "600")
	env := n.env([]testutil.KubeletContainer{{Namespace: "etl", Pod: long, UID: realUIDA, Container: "worker", ID: realIDA}})
	mfs := scrapeLayout(t, env)
	if m := seriesForLabels(mfs, "quota_cpu_limit_cores", "cgroup", n.path(pod+"/"+realIDA), "namespace", "etl", "pod", long, "container", "worker"); m == nil {
		t.Errorf("the container of a long-named pod is not named: %v", seriesLabels(mfs, "quota_cpu_limit_cores"))
	}
	if m := seriesForLabels(mfs, "quota_cpu_limit_cores", "cgroup", n.path(pod), "namespace", "etl", "pod", long); m == nil {
		t.Errorf("the long-named pod is not named: %v", seriesLabels(mfs, "quota_cpu_limit_cores"))
	}
}

// Issue 30, crun's subgroup holds the CPU quota: the kernel counts throttling only in the
// cpu.stat of the cgroup whose quota ran out, so the container, exported once from its
// scope, takes its throttling counters from the subgroup as well. A busy loop runs in the
// subgroup under a 0.2-core quota: with containerd (the scope unlimited) the scope's own
// counters stay 0 and the exported ones are the subgroup's; with CRI-O (the same quota on
// both) each level counts part of the same stalls and the exported ones are, counter by
// counter, the larger (cgroupfs.CPUStat.MaxThrottling). Ground truth: both levels' cpu.stat
// read directly just before and after the scrape. The throttling sampler watches the
// container and sees it frozen, as the subgroup's own counters say.
func TestRealCrunThrottlingCountedOnSubgroup(t *testing.T) {
	bin := testutil.BuildC(t, filepath.Join("..", "..", "examples", "workloads", "bursty", "bursty.c"), "-O1", "-pthread")
	for _, tc := range []struct {
		name, scope, runtime string
		scopeQuota           int64
	}{
		{"containerd", "cri-containerd-" + realIDA + ".scope", "containerd", 0},
		{"crio", "crio-" + realIDA + ".scope", "cri-o", 20000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNodeTree(t, "crunthr"+tc.name)
			pod := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + systemdUID(realUIDA) + ".slice"
			scope := pod + "/" + tc.scope
			scopeCg := n.at(scope, testutil.CgroupOptions{QuotaUS: tc.scopeQuota})
			sub := n.at(scope+"/container", testutil.CgroupOptions{QuotaUS: 20000})
			run(t, sub, bin, "1", "1", "1") // one thread that never idles
			env := n.env([]testutil.KubeletContainer{{Namespace: "shop", Pod: "cart-0", UID: realUIDA, Container: "cart", ID: realIDA}})

			thr := newThrottleSampler(env, time.Second, nil)
			defer thr.Close()
			ctx := context.Background()
			thr.sampler.Rediscover(ctx)
			time.Sleep(300 * time.Millisecond)
			thr.sampler.Sample(ctx) // the first read: counters only, no window yet
			subStart := sub.ReadKeyed("cpu", "cpu.stat")
			const windows = 4
			tick := time.NewTicker(time.Second)
			for range windows {
				<-tick.C
				thr.sampler.Sample(ctx)
			}
			tick.Stop()
			subEnd := sub.ReadKeyed("cpu", "cpu.stat")
			share := float64(subEnd["nr_throttled"]-subStart["nr_throttled"]) / float64(max(1, subEnd["nr_periods"]-subStart["nr_periods"]))
			testutil.Require(t, share >= 0.5, "the busy loop was throttled in under half the periods (the machine's CPUs are busy elsewhere)")

			s := thr.series()[n.root.Path+"/"+scope]
			if s == nil || s.Ratio.Count != windows {
				t.Fatalf("the sampler's windows of the container: %+v, want %d (sampled: %v)", s, windows, keys(thr.series()))
			}
			if mean := s.Ratio.Sum / float64(s.Ratio.Count); mean < share-0.15 {
				t.Errorf("the sampler's mean window ratio %.2f, want the subgroup's throttled share %.2f", mean, share)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister((&Set{env: env, collectors: map[string]Collector{"throttle": thr}}).Bind(ctx))
			if m := seriesFor(testutil.Families(t, reg), "quota_cpu_throttled_window_ratio", n.path(scope), "container", "cart"); m == nil || m.Histogram.GetSampleCount() != windows {
				t.Errorf("the container's quota_cpu_throttled_window_ratio: %v, want %d windows", m, windows)
			}

			// Scrape-time counters: within what the kernel said just before and just after.
			before := [2]map[string]uint64{scopeCg.ReadKeyed("cpu", "cpu.stat"), sub.ReadKeyed("cpu", "cpu.stat")}
			mfs := scrapeLayout(t, env)
			after := [2]map[string]uint64{scopeCg.ReadKeyed("cpu", "cpu.stat"), sub.ReadKeyed("cpu", "cpu.stat")}
			t.Logf("scope cpu.stat %v, subgroup %v", after[0], after[1])
			if tc.scopeQuota == 0 && after[0]["nr_throttled"] != 0 {
				t.Errorf("an unlimited scope counted throttling: %v", after[0])
			}
			for _, c := range []struct {
				family, key string
				scale       float64
			}{
				{"quota_cpu_periods_total", "nr_periods", 1},
				{"quota_cpu_throttled_periods_total", "nr_throttled", 1},
				{"quota_cpu_throttled_seconds_total", "throttled_time", 1e9},
			} {
				lo := float64(max(before[0][c.key], before[1][c.key])) / c.scale
				hi := float64(max(after[0][c.key], after[1][c.key])) / c.scale
				got := value(seriesFor(mfs, c.family, n.path(scope), "container_id", tc.runtime+"://"+realIDA, "container", "cart"))
				if !(got > 0 && got >= lo && got <= hi) {
					t.Errorf("%s of the scope %v, want > 0 and the larger level's, within [%v, %v] (the subgroup's before and after the scrape)", c.family, got, lo, hi)
				}
			}
			for name := range mfs {
				for _, l := range seriesLabels(mfs, name) {
					if strings.HasSuffix(l["cgroup"], "/container") {
						t.Errorf("%s: crun's subgroup exported: %v", name, l)
					}
				}
			}
			if skipped(mfs, "runtime_subgroup") != 1 {
				t.Errorf("skipped runtime_subgroup %v, want 1", skipped(mfs, "runtime_subgroup"))
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
