package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/diagnose"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// evidenceValue is the named fact of a finding, -1 when absent.
func evidenceValue(f diagnose.Finding, name string) float64 {
	for _, e := range f.Evidence {
		if e.Name == name {
			return e.Value
		}
	}
	return -1
}

// favouredShares is the cpu.shares a scenario's cgroup (and the tests' parent) gets.
const favouredShares = "16384"

// favour gives the scenario's cgroup, and the tests' parent cgroup above it, a high CPU
// weight (cpu.shares), as a node that is not oversubscribed gives a workload the CPU it asks
// for: on this 2-core host shared with builds, a cgroup at the default weight often gets
// less than its quota and is never throttled, whatever it runs. The weight changes who gets
// the CPU, not how the quota throttles. The parent's weight is only ever raised (other
// tests' cgroups share it); it is left raised.
func favour(t *testing.T, s *scenario) {
	t.Helper()
	s.cg.Write("cpu", "cpu.shares", favouredShares)
	parent := filepath.Join(filepath.Dir(s.cg.Dir("cpu")), "cpu.shares")
	if b, err := os.ReadFile(parent); err == nil {
		if n, _ := strconv.Atoi(string(b[:len(b)-1])); n < 16384 {
			if err := os.WriteFile(parent, []byte(favouredShares), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Seed 001 in a real cgroup, scaled down: the demo's warm-up workload in a 1-core limit
// (its JIT-heavy phase lasts some 10–20 s here, not minutes), diagnosed in its first seconds,
// gets the warm-up finding: a limit that covers the measured usage plus throttled time, the
// request at the current limit, and the longest throttled run. The same process judged at
// the same time as old (--warmup.period=1s) is throttling, not warm-up. (It may also get
// the arena finding: a JVM's compiler threads fill glibc arenas, and the rule is right.)
func TestDiagnoseWarmup(t *testing.T) {
	testutil.RequireV1Cgroups(t)
	bin := buildExporter(t)
	java := testutil.LookPath(t, "java")
	javac := testutil.LookPath(t, "javac")
	src := filepath.Join("..", "..", "..", "examples", "workloads", "jvm-warmup")
	dir := t.TempDir()
	gen, classes := filepath.Join(dir, "src"), filepath.Join(dir, "classes")
	if out, err := exec.Command(java, filepath.Join(src, "GenHot.java"), gen, "6000").CombinedOutput(); err != nil {
		t.Fatalf("GenHot: %v\n%s", err, out)
	}
	srcs, _ := filepath.Glob(filepath.Join(gen, "*.java"))
	if out, err := exec.Command(javac, append([]string{"-d", classes, filepath.Join(src, "Warmup.java")}, srcs...)...).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	include := fmt.Sprintf("--cgroup.include=.*/diag-warmup-%d-.*", os.Getpid())
	promURL := startPrometheus(t, bin, include)
	started := time.Now()
	s := startScenario(t, "warmup", testutil.CgroupOptions{QuotaUS: 100000, MemoryLimit: 512 << 20}, nil,
		java, "-Xms128m", "-Xmx128m", "-cp", classes, "Warmup", "4")
	favour(t, s)
	warm := watchThrottling(t, s)
	var (
		young, old diagnose.Report
		code       int
		wg         sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		old, _ = diagnoseJSON(t, bin, "--duration=5s", "--warmup.period=1s", include)
	}()
	young, code = diagnoseJSON(t, bin, "--duration=5s", include)
	wg.Wait()
	var f diagnose.Finding
	for _, g := range findingsFor(young, s.cg.Path) {
		if g.Rule == diagnose.RuleWarmup {
			if f.Rule != "" {
				t.Errorf("two warm-up findings: %+v", young.Findings)
			}
			f = g
		} else if g.Rule != diagnose.RuleMallocArenas {
			t.Errorf("unexpected finding: %+v", g)
		}
	}
	if f.Rule == "" {
		t.Fatalf("no %s finding: %+v (exit %d)", diagnose.RuleWarmup, young.Findings, code)
	}
	limit, _ := strconv.ParseFloat(f.Fix.Settings["cpu_limit_cores"], 64)
	demand := evidenceValue(f, "warmup_demand_cores")
	t.Logf("warm-up: %s; fix %s", evidenceText(f), f.Fix.Text)
	if demand <= 1 || limit < demand || limit > demand+0.1 || f.Fix.Settings["cpu_request_cores"] != "1" {
		t.Errorf("demand %.2f cores, fix %+v: want a limit covering the demand (above 1 core) and request 1", demand, f.Fix.Settings)
	}
	if evidenceValue(f, "longest_throttled_run_seconds") < 1 {
		t.Errorf("no longest throttled run in the evidence: %+v", f.Evidence)
	}
	if f.Process != "Warmup" || f.Runtime != "jvm" {
		t.Errorf("process %q runtime %q", f.Process, f.Runtime)
	}

	// Older than the warm-up period: the same throttling is no warm-up.
	rules := map[string]bool{}
	for _, g := range findingsFor(old, s.cg.Path) {
		rules[g.Rule] = true
	}
	if rules[diagnose.RuleWarmup] || !rules[diagnose.RuleThrottling] {
		t.Errorf("judged old: findings %s, want throttling and no warm-up", findingKeys(old))
	}

	// History, once the warm-up is over: the warm-up against the steady state after it, from
	// what Prometheus stored. The request now follows the steady state.
	// When the warm-up ended is the kernel's to say: the JIT-heavy phase lasts some 10 s on a
	// quiet machine and longer on a busy one. The warm-up period given to diagnose ends when
	// the cgroup was last throttled in a fifth or more of its periods over 5 s (held below for
	// 15 s, at most 150 s after the start); the steady state is what follows. Not when
	// throttling stopped altogether: the JVM's GC and request bursts are throttled a period
	// or two in 50 for ever after, and a warm-up period stretched to the last of those (37 s
	// after a 10 s warm-up, seen here) dilutes the warm-up's share below the rule's 10%.
	time.Sleep(time.Until(started.Add(30 * time.Second)))
	last := warm.busyUntil()
	for time.Since(last) < 15*time.Second && time.Since(started) < 150*time.Second {
		time.Sleep(time.Second)
		last = warm.busyUntil()
	}
	period := last.Sub(started).Round(time.Second) + 2*time.Second
	since := time.Since(started).Round(time.Second) + 5*time.Second
	t.Logf("history: the cgroup was last throttled in a fifth of its periods (over 5 s) %s after the start; diagnose --since=%s --warmup.period=%s",
		last.Sub(started).Round(time.Second), since, period)
	hist, _ := diagnoseJSON(t, bin, "--prometheus.url="+promURL, "--since="+since.String(), "--warmup.period="+period.String())
	f = diagnose.Finding{}
	for _, g := range findingsFor(hist, s.cg.Path) {
		if g.Rule == diagnose.RuleWarmup {
			f = g
		}
	}
	if f.Rule == "" {
		logHistory(t, promURL, s.cg.Path, started)
		t.Fatalf("history: no %s finding: %s", diagnose.RuleWarmup, findingKeys(hist))
	}
	t.Logf("history: %s; fix %s", evidenceText(f), f.Fix.Text)
	steady := evidenceValue(f, "steady_usage_cores")
	request, _ := strconv.ParseFloat(f.Fix.Settings["cpu_request_cores"], 64)
	limit, _ = strconv.ParseFloat(f.Fix.Settings["cpu_limit_cores"], 64)
	if steady < 0 || steady >= 1 || request < steady || request > steady+0.1 || limit <= 1 {
		t.Errorf("history: steady %.2f cores, fix %+v: want the request at the steady state, the limit above 1", steady, f.Fix.Settings)
	}
}

// throttlingWatch samples a scenario's cpu.stat every 500 ms from its start, until the test ends.
type throttlingWatch struct {
	mu      sync.Mutex
	samples []cpuStatSample
}

type cpuStatSample struct {
	at                 time.Time
	periods, throttled uint64
}

func watchThrottling(t *testing.T, s *scenario) *throttlingWatch {
	w := &throttlingWatch{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	file := filepath.Join(s.cg.Dir("cpu"), "cpu.stat") // ReadKeyed fails the test: not from a goroutine
	go func() {
		defer close(stopped)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			if st, err := testutil.ReadKeyedFile(file); err == nil {
				w.mu.Lock()
				w.samples = append(w.samples, cpuStatSample{time.Now(), st["nr_periods"], st["nr_throttled"]})
				w.mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// busyUntil is the end of the last 5 s in which the cgroup was throttled in at least a fifth
// of its periods (the first sample's time when none was).
func (w *throttlingWatch) busyUntil() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.samples) == 0 {
		return time.Now()
	}
	last := w.samples[0].at
	j := 0
	for _, cur := range w.samples {
		for j+1 < len(w.samples) && cur.at.Sub(w.samples[j+1].at) >= 5*time.Second {
			j++
		}
		from := w.samples[j]
		if cur.at.Sub(from.at) < 5*time.Second {
			continue
		}
		if periods := cur.periods - from.periods; periods > 0 && 5*(cur.throttled-from.throttled) >= periods {
			last = cur.at
		}
	}
	return last
}

// Seed 002 in a real cgroup: 32 threads reading one shared file descriptor under a 1-core
// limit spend most of their CPU in the kernel and are throttled: diagnose advises one
// dedicated CPU (cpuset) rather than the quota.
func TestDiagnoseKernelContention(t *testing.T) {
	testutil.RequireV1Cgroups(t)
	bin := buildExporter(t)
	prog := testutil.BuildC(t, filepath.Join("..", "..", "..", "examples", "workloads", "kernel-contention", "kernel_contention.c"), "-O2", "-pthread")
	data := filepath.Join(t.TempDir(), "shared.dat")
	if err := os.WriteFile(data, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startScenario(t, "kernel", testutil.CgroupOptions{QuotaUS: 100000, MemoryLimit: 256 << 20}, nil, prog, data, "32")
	favour(t, s)
	time.Sleep(time.Second)
	r, code := diagnoseJSON(t, bin, "--duration=5s", "--process.min-resident=0", fmt.Sprintf("--cgroup.include=.*/diag-kernel-%d-.*", os.Getpid()))
	fs := findingsFor(r, s.cg.Path)
	if len(fs) != 1 || fs[0].Rule != diagnose.RuleKernel {
		st, _ := workloadFor(r, s.cg.Path)
		t.Fatalf("want one %s finding, got %+v (exit %d, state %+v)", diagnose.RuleKernel, fs, code, st)
	}
	f := fs[0]
	t.Logf("kernel contention: %s", evidenceText(f))
	if f.Fix.Settings["cpuset_cpus"] != "1" {
		t.Errorf("fix %+v, want cpuset_cpus=1", f.Fix.Settings)
	}
	if share := evidenceValue(f, "system_share"); share < 0.5 {
		t.Errorf("system share %.2f", share)
	}
	// The process is watched (min-resident 0): its 33 threads → one per CPU.
	if f.Fix.Settings["threads"] != "1" || evidenceValue(f, "threads") < 32 {
		t.Errorf("threads: fix %+v evidence %+v", f.Fix.Settings, f.Evidence)
	}
}

func evidenceText(f diagnose.Finding) string {
	s := ""
	for i, e := range f.Evidence {
		if i > 0 {
			s += ", "
		}
		s += e.Text
	}
	return s
}

// The layout of `kubectl debug node/<node> --profile=sysadmin` (docs/diagnose.md), short of
// Kubernetes: the host PID namespace, the node's root bind-mounted recursively at /host (a
// private mount namespace here), diagnose run with --path.procfs=/host/proc
// --path.sysfs=/host/sys. As root it finds a GOMAXPROCS=16 program in 0.5 cores; as the
// image's default user (65534, what the profile alone runs) it cannot read the program and
// says so in a note.
func TestDiagnoseNodeDebugLayout(t *testing.T) {
	testutil.RequireV1Cgroups(t)
	unshare, setpriv := testutil.LookPath(t, "unshare"), testutil.LookPath(t, "setpriv")
	bin := buildExporter(t)
	prog := testutil.BuildGo(t, filepath.Join("..", "..", "..", "examples", "workloads", "go-gomaxprocs"))
	s := startScenario(t, "nodedebug", testutil.CgroupOptions{QuotaUS: 50000, MemoryLimit: 256 << 20}, []string{"GOMAXPROCS=16"}, prog)
	// uid 65534 must reach the binary and /host: a directory open to all.
	pub, err := os.MkdirTemp("", "diag-nodedebug-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pub) })
	b, err := os.ReadFile(bin)
	if err == nil {
		err = os.WriteFile(filepath.Join(pub, "quota_exporter"), b, 0o755)
	}
	if err == nil {
		err = os.Chmod(pub, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(pub, "quota_exporter")
	host := filepath.Join(pub, "host")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"0", "65534"} {
		script := fmt.Sprintf(`mount --rbind / %[1]s && exec %[2]s --reuid %[3]s --regid %[3]s --clear-groups %[4]s diagnose --format=json --duration=3s --log.level=error `+
			`--cgroup.include='.*/diag-nodedebug-%[5]d-.*' --path.procfs=%[1]s/proc --path.sysfs=%[1]s/sys --path.rootfs=%[1]s --path.podlogs=%[1]s/var/log`,
			host, setpriv, user, bin, os.Getpid())
		cmd := exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-c", script)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("uid %s: %v", user, err)
		}
		var r diagnose.Report
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("uid %s: %v\n%s%s", user, err, out, stderr.String())
		}
		rules := map[string]bool{}
		for _, f := range findingsFor(r, s.cg.Path) {
			rules[f.Rule] = true
		}
		t.Logf("uid %s: findings %s; notes %q", user, findingKeys(r), r.Notes)
		if user == "0" && (!rules[diagnose.RuleGoMaxProcs] || len(r.Notes) != 0) {
			t.Errorf("as root under /host: want the GOMAXPROCS finding and no note")
		}
		if user != "0" && (rules[diagnose.RuleGoMaxProcs] || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "need root")) {
			t.Errorf("as uid %s: want no GOMAXPROCS finding and a note that root is needed", user)
		}
	}
}

// logHistory logs what Prometheus stored of a cgroup since start, 5 s a row: its throttled
// periods and seconds, its periods and its processes' CPU (what history diagnose judged).
func logHistory(t *testing.T, promURL, cgroup string, start time.Time) {
	t.Helper()
	sel := fmt.Sprintf("{cgroup=%q}", cgroup)
	for _, expr := range []string{
		"increase(quota_cpu_periods_total" + sel + "[5s])",
		"increase(quota_cpu_throttled_periods_total" + sel + "[5s])",
		"increase(quota_cpu_throttled_seconds_total" + sel + "[5s])",
		"sum(increase(quota_process_cpu_seconds_total" + sel + "[5s]))",
		"max(time() - quota_process_start_time_seconds" + sel + ")",
	} {
		q := url.Values{"query": {expr}, "start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(time.Now().Unix(), 10)}, "step": {"5"}}
		resp, err := http.Get(promURL + "/api/v1/query_range?" + q.Encode())
		if err != nil {
			t.Logf("%s: %v", expr, err)
			continue
		}
		var body struct {
			Data struct {
				Result []struct {
					Values [][2]any `json:"values"`
				} `json:"result"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		var row []string
		for _, r := range body.Data.Result {
			for _, v := range r.Values {
				row = append(row, fmt.Sprint(v[1]))
			}
		}
		t.Logf("%s (err %v): %s", expr, err, strings.Join(row, " "))
	}
}
