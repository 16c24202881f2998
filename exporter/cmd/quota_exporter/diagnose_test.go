package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/diagnose"
	"github.com/quota-exporter/quota_exporter/exporter/internal/malloc"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/diagnose-*.txt")

// runDiagnose runs `quota_exporter diagnose args...` and returns stdout and the exit status.
func runDiagnose(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"diagnose", "--log.level=error"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return stdout.String(), exit.ExitCode()
	case err != nil:
		t.Fatalf("diagnose: %v\n%s", err, stderr.String())
	}
	return stdout.String(), 0
}

// diagnoseJSON runs diagnose --format json, checks the output against the published schema
// and decodes it.
func diagnoseJSON(t *testing.T, bin string, args ...string) (diagnose.Report, int) {
	t.Helper()
	out, code := runDiagnose(t, bin, append([]string{"--format=json"}, args...)...)
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "..", "..", "docs", "diagnose.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("diagnose output is not JSON (exit %d): %v\n%s", code, err, out)
	}
	if err := sch.Validate(doc); err != nil {
		t.Errorf("diagnose JSON does not match docs/diagnose.schema.json: %v", err)
	}
	var r diagnose.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return r, code
}

// On a fixture host (v1, Kubernetes cgroupfs driver: the CPU limit on the pod, the
// container unlimited, and an unlimited container) diagnose finds nothing, names the pod's
// limit as the binding one, and exits 0; text goes to a golden file.
func TestDiagnoseFixtureHost(t *testing.T) {
	bin := buildExporter(t)
	root := t.TempDir()
	pod := "/kubepods/burstable/pod8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a"
	if err := fixture.Write(root, fixture.V1, []fixture.Cgroup{
		{Path: "/", PIDs: []int{1}, UserUS: 9e9, SystemUS: 2e9},
		{Path: "/kubepods", MemoryLimit: 7 << 30, Shares: 2048},
		{Path: pod, QuotaUS: 150000, MemoryLimit: 1 << 30, Periods: 4200, Throttled: 3900, ThrottledUS: 610e6},
		{Path: pod + "/9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d", PIDs: []int{6001}, UserUS: 4.1e8, SystemUS: 2e7},
		{Path: "/docker/fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210", PIDs: []int{6301}, QuotaUS: 50000},
	}); err != nil {
		t.Fatal(err)
	}
	args := []string{"--duration=1s", "--all", "--path.procfs=" + filepath.Join(root, "proc"), "--path.sysfs=" + filepath.Join(root, "sys"),
		"--path.podlogs=", "--no-collector.throttle"}
	out, code := runDiagnose(t, bin, args...)
	if code != 0 {
		t.Errorf("exit %d, want 0 (no findings)", code)
	}
	out = regexp.MustCompile(`\(live, [0-9.]+ s observed\)`).ReplaceAllString(out, "(live, N s observed)")
	golden := filepath.Join("testdata", "diagnose-fixture.txt")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if out != string(want) {
		t.Errorf("report differs from %s:\n%s", golden, out)
	}
	r, code := diagnoseJSON(t, bin, args...)
	if code != 0 || r.Worst != "none" || len(r.Workloads) != 3 {
		t.Errorf("JSON: exit %d worst %s workloads %+v", code, r.Worst, r.Workloads)
	}

	// Could not run: no procfs (so no mountinfo, no hierarchies); a bad flag.
	if _, code := runDiagnose(t, bin, "--duration=1s", "--path.procfs="+filepath.Join(root, "nonexistent")); code != 3 {
		t.Errorf("exit %d without procfs, want 3", code)
	}
	if _, code := runDiagnose(t, bin, "--format=yaml"); code != 3 {
		t.Errorf("exit %d for a bad --format, want 3", code)
	}
}

// seedWorkloads are the end-to-end seed scenarios (examples/workloads), built once.
type seedWorkloads struct{ gcStorm, jvmHealthy, goMaxProcs, goHealthy, rssCreep string }

func buildSeedWorkloads(t *testing.T) seedWorkloads {
	t.Helper()
	javac := testutil.LookPath(t, "javac")
	testutil.LookPath(t, "java")
	src := filepath.Join("..", "..", "..", "examples", "workloads")
	dir := t.TempDir()
	w := seedWorkloads{gcStorm: filepath.Join(dir, "gc-storm"), jvmHealthy: filepath.Join(dir, "healthy"),
		goMaxProcs: testutil.BuildGo(t, filepath.Join(src, "go-gomaxprocs")), goHealthy: testutil.BuildGo(t, filepath.Join(src, "go-healthy")),
		rssCreep: testutil.BuildC(t, filepath.Join(src, "rss-creep", "rss_creep.c"), "-O2", "-pthread")}
	steps := []*exec.Cmd{
		exec.Command(javac, "-d", w.gcStorm, filepath.Join(src, "jvm-gc-storm", "GcStorm.java")),
		exec.Command(javac, "-d", w.jvmHealthy, filepath.Join(src, "jvm-healthy", "Healthy.java")),
	}
	for _, c := range steps {
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c.Args, " "), err, out)
		}
	}
	return w
}

// scenario is one workload in its own real cgroup.
type scenario struct {
	cg   *testutil.Cgroup
	cmd  *exec.Cmd
	name string
}

func startScenario(t *testing.T, name string, opts testutil.CgroupOptions, env []string, argv ...string) *scenario {
	t.Helper()
	cg := testutil.NewCgroup(t, "diag-"+name, opts)
	cmd := cg.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &scenario{cg: cg, cmd: cmd, name: name}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, logs.String())
		}
	})
	return s
}

// stop kills the workload's process group (the test's own child) and reaps it.
func (s *scenario) stop() {
	if s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Wait()
}

func findingsFor(r diagnose.Report, cg string) []diagnose.Finding {
	var out []diagnose.Finding
	for _, f := range r.Findings {
		if f.Cgroup == cg {
			out = append(out, f)
		}
	}
	return out
}

func workloadFor(r diagnose.Report, cg string) (diagnose.WorkloadState, bool) {
	for _, w := range r.Workloads {
		if w.Cgroup == cg {
			return w, true
		}
	}
	return diagnose.WorkloadState{}, false
}

const seedSample = "10s"

// The seed scenarios in real cgroups: each gets exactly its finding with the fix values
// HotSpot, Go and glibc rules give for its limit, the healthy controls none; then the three
// are restarted with the suggested setting and diagnose reports nothing for them, with less
// throttled time (JVM, Go) and fewer arenas (glibc).
func TestDiagnoseSeedScenarios(t *testing.T) {
	testutil.RequireV1Cgroups(t)
	bin := buildExporter(t)
	w := buildSeedWorkloads(t)
	const mem = 512 << 20
	// One allocating thread: alone it fits a 1-core limit, so the throttling that remains
	// is the GC threads' doing.
	gcStormArgs := func(cpus string) []string {
		return []string{"java", "-XX:ActiveProcessorCount=" + cpus, "-XX:+UseParallelGC", "-Xms96m", "-Xmx96m", "-cp", w.gcStorm, "GcStorm", "1"}
	}
	// Seed 000: 24 CPUs → 18 parallel GC threads, in the seed's 1-core limit (restarted with
	// the fix below) and in the 0.3-core limit (the fix values only: one allocating
	// thread alone needs more than 0.3 cores, so throttling stays whatever the GC does).
	gcStorm := startScenario(t, "gc-storm", testutil.CgroupOptions{QuotaUS: 100000, MemoryLimit: mem}, nil, gcStormArgs("24")...)
	favour(t, gcStorm) // its GC threads must find the CPUs to overrun the quota with
	gcStorm03 := startScenario(t, "gc-storm-0.3", testutil.CgroupOptions{QuotaUS: 30000, MemoryLimit: mem}, nil, gcStormArgs("24")...)
	goMax := startScenario(t, "go-gomaxprocs", testutil.CgroupOptions{QuotaUS: 50000, MemoryLimit: mem}, []string{"GOMAXPROCS=16"}, w.goMaxProcs)
	rss := startScenario(t, "rss-creep", testutil.CgroupOptions{QuotaUS: 100000, MemoryLimit: 2 << 30}, []string{"MALLOC_ARENA_MAX=", "GLIBC_TUNABLES="}, w.rssCreep, "32", "256")
	jvmOK := startScenario(t, "jvm-healthy", testutil.CgroupOptions{QuotaUS: 200000, MemoryLimit: mem}, nil,
		"java", "-XX:ActiveProcessorCount=2", "-XX:ParallelGCThreads=2", "-XX:+UseParallelGC", "-Xmx128m", "-cp", w.jvmHealthy, "Healthy", "20")
	goOK := startScenario(t, "go-healthy", testutil.CgroupOptions{QuotaUS: 200000, MemoryLimit: mem}, []string{"GOMAXPROCS=2"}, w.goHealthy, "-rate", "20")
	include := fmt.Sprintf("--cgroup.include=.*/diag-.*-%d-.*", os.Getpid())
	promURL := startPrometheus(t, bin, include)
	time.Sleep(5 * time.Second) // JVM start-up and the first arenas

	thr0 := throttleUse(t, gcStorm.cg)
	before, code := diagnoseJSON(t, bin, "--duration="+seedSample, "--all", include)
	thrJVM := throttleUse(t, gcStorm.cg).since(thr0)
	if want := map[string]int{"warning": 1, "critical": 2}[before.Worst]; want == 0 || code != want {
		t.Errorf("exit %d worst %s, want 1 or 2 and the two matching", code, before.Worst)
	}
	// History: the same rules over what Prometheus stored from the exporter in the same
	// span give the same findings and fixes.
	hist, _ := diagnoseJSON(t, bin, "--prometheus.url="+promURL, "--since="+seedSample, "--all")
	if hist.Source != "history" || !sameFindings(before, hist) {
		t.Errorf("history findings differ from live:\nlive    %s\nhistory %s", findingKeys(before), findingKeys(hist))
	}
	for _, s := range []*scenario{jvmOK, goOK} {
		if fs := findingsFor(before, s.cg.Path); len(fs) != 0 {
			t.Errorf("healthy %s has findings: %+v", s.name, fs)
		}
		if st, ok := workloadFor(before, s.cg.Path); !ok || st.State != "ok" {
			t.Errorf("healthy %s: state %+v (listed %t)", s.name, st, ok)
		}
	}
	want := map[*scenario]struct {
		rule     string
		settings map[string]string
	}{
		gcStorm:   {diagnose.RuleJVMThreads, map[string]string{"-XX:ActiveProcessorCount": "1"}},
		gcStorm03: {diagnose.RuleJVMThreads, map[string]string{"-XX:ActiveProcessorCount": "1"}},
		goMax:     {diagnose.RuleGoMaxProcs, map[string]string{"GOMAXPROCS": "1"}},
		rss:       {diagnose.RuleMallocArenas, map[string]string{"MALLOC_ARENA_MAX": "2"}},
	}
	fixes := map[*scenario]map[string]string{}
	for s, exp := range want {
		fs := findingsFor(before, s.cg.Path)
		if len(fs) != 1 || fs[0].Rule != exp.rule {
			st, _ := workloadFor(before, s.cg.Path)
			t.Errorf("%s: want exactly one %s finding, got %+v (state %+v)", s.name, exp.rule, fs, st)
			continue
		}
		for k, v := range exp.settings {
			if fs[0].Fix.Settings[k] != v {
				t.Errorf("%s: fix %s=%q, want %q (%s)", s.name, k, fs[0].Fix.Settings[k], v, fs[0].Fix.Text)
			}
		}
		fixes[s] = fs[0].Fix.Settings
	}
	// The evidence and HotSpot's own sizes for one CPU with Parallel GC.
	for _, s := range []*scenario{gcStorm, gcStorm03} {
		if fs := findingsFor(before, s.cg.Path); len(fs) == 1 {
			if !strings.Contains(fs[0].Fix.Text, "ParallelGCThreads=1, ConcGCThreads=0, CICompilerCount=2") {
				t.Errorf("%s: JVM fix lacks the thread counts HotSpot chooses for 1 CPU: %s", s.name, fs[0].Fix.Text)
			}
			if fs[0].Evidence[1].Value != 18 {
				t.Errorf("%s: evidence %+v, want 18 parallel GC threads", s.name, fs[0].Evidence[1])
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	evidence := func(r diagnose.Report, cg, name string) float64 {
		for _, f := range findingsFor(r, cg) {
			for _, e := range f.Evidence {
				if e.Name == name {
					return e.Value
				}
			}
		}
		return -1
	}
	thrGo := throttledSeconds(t, goMax.cg)
	arenasBefore := evidence(before, rss.cg.Path, "malloc_arenas")

	// The fix, verified: the same workloads with the suggested settings, in fresh cgroups.
	for _, s := range []*scenario{gcStorm, gcStorm03, goMax, rss, jvmOK, goOK} {
		s.stop()
	}
	jvmFixed := startScenario(t, "gc-storm-fixed", testutil.CgroupOptions{QuotaUS: 100000, MemoryLimit: mem}, nil,
		gcStormArgs(fixes[gcStorm]["-XX:ActiveProcessorCount"])...)
	favour(t, jvmFixed)
	goFixed := startScenario(t, "go-gomaxprocs-fixed", testutil.CgroupOptions{QuotaUS: 50000, MemoryLimit: mem},
		[]string{"GOMAXPROCS=" + fixes[goMax]["GOMAXPROCS"]}, w.goMaxProcs)
	rssFixed := startScenario(t, "rss-creep-fixed", testutil.CgroupOptions{QuotaUS: 100000, MemoryLimit: 2 << 30},
		[]string{"MALLOC_ARENA_MAX=" + fixes[rss]["MALLOC_ARENA_MAX"], "GLIBC_TUNABLES="}, w.rssCreep, "32", "256")
	time.Sleep(5 * time.Second)
	thr0 = throttleUse(t, jvmFixed.cg)
	after, code := diagnoseJSON(t, bin, "--duration="+seedSample, "--all", include)
	thrJVMFixed := throttleUse(t, jvmFixed.cg).since(thr0)
	if code != 0 {
		t.Errorf("after the fixes: exit %d, findings %+v", code, after.Findings)
	}
	for _, s := range []*scenario{jvmFixed, goFixed, rssFixed} {
		if _, ok := workloadFor(after, s.cg.Path); !ok {
			t.Errorf("%s not watched after the fix", s.name)
		}
	}
	// The JVM's throttled periods per second of CPU it used over each sample: the same
	// allocation loop, so the same work per CPU second, whatever CPU the busy host left it
	// (both favoured: the GC threads find CPUs to overrun the quota with); the Go program's
	// throttled time since its start (5 s + the sample both times).
	t.Logf("JVM before: %s; with the fix: %s", thrJVM, thrJVMFixed)
	if thrJVM.perCPUSecond() <= 0 {
		t.Errorf("the un-fixed JVM was not throttled (%s): the check cannot show a drop", thrJVM)
	} else if thrJVMFixed.perCPUSecond() >= thrJVM.perCPUSecond()/2 {
		t.Errorf("JVM throttled %.2f periods per CPU second with ActiveProcessorCount=1, %.2f before: not less than half", thrJVMFixed.perCPUSecond(), thrJVM.perCPUSecond())
	}
	if got := throttledSeconds(t, goFixed.cg); got >= thrGo {
		t.Errorf("Go throttled %.2f s with GOMAXPROCS=1, %.2f s before: not less", got, thrGo)
	} else {
		t.Logf("Go throttled %.2f s before, %.2f s with the fix", thrGo, got)
	}
	arenasAfter := glibcArenas(t, rssFixed)
	if arenasBefore < 0 || float64(arenasAfter) >= arenasBefore {
		t.Errorf("arenas %d with MALLOC_ARENA_MAX, %.0f before: not fewer", arenasAfter, arenasBefore)
	} else {
		t.Logf("arenas %.0f before, %d with the fix", arenasBefore, arenasAfter)
	}
}

// findingKeys lists cgroup, rule and fix settings of each finding, sorted.
func findingKeys(r diagnose.Report) string {
	var keys []string
	for _, f := range r.Findings {
		keys = append(keys, fmt.Sprintf("%s %s %v", f.Cgroup, f.Rule, f.Fix.Settings))
	}
	slices.Sort(keys)
	return strings.Join(keys, "; ")
}

func sameFindings(a, b diagnose.Report) bool { return findingKeys(a) == findingKeys(b) }

// startPrometheus runs the exporter (serve, the same cgroup filter, full histograms like
// diagnose) and the pinned Prometheus scraping it every second; it returns Prometheus's URL.
func startPrometheus(t *testing.T, bin, include string) string {
	t.Helper()
	out, err := exec.Command("go", "tool", "-modfile="+filepath.Join("..", "..", "..", "tools", "go.mod"), "-n", "prometheus").Output()
	testutil.Require(t, err == nil, fmt.Sprintf("pinned prometheus (make tools): %v", err))
	exporterAddr := startExporter(t, nil, bin, include, "--throttle.full-histograms", "--log.level=warn")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: quota\n    static_configs:\n      - targets: [%q]\n", exporterAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	prom := exec.Command(strings.TrimSpace(string(out)), "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	var logs bytes.Buffer
	prom.Stdout, prom.Stderr = &logs, &logs
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = prom.Process.Kill()
		_ = prom.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return "http://" + addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready:\n%s", logs.String())
		}
	}
}

// throttleSample is a cgroup's cumulative throttling and CPU use (v1 cpu.stat, cpuacct.stat).
type throttleSample struct{ periods, seconds, cpu float64 }

func throttleUse(t *testing.T, cg *testutil.Cgroup) throttleSample {
	t.Helper()
	st, acct := cg.ReadKeyed("cpu", "cpu.stat"), cg.ReadKeyed("cpuacct", "cpuacct.stat")
	// cpuacct.stat counts USER_HZ ticks, 100 a second on Linux.
	return throttleSample{periods: float64(st["nr_throttled"]), seconds: float64(st["throttled_time"]) / 1e9, cpu: float64(acct["user"]+acct["system"]) / 100}
}

func (s throttleSample) since(a throttleSample) throttleSample {
	return throttleSample{s.periods - a.periods, s.seconds - a.seconds, s.cpu - a.cpu}
}

func (s throttleSample) perCPUSecond() float64 {
	if s.cpu <= 0 {
		return 0
	}
	return s.periods / s.cpu
}

func (s throttleSample) String() string {
	return fmt.Sprintf("%.0f throttled periods, %.2f s throttled, %.2f CPU s used: %.2f periods per CPU s", s.periods, s.seconds, s.cpu, s.perCPUSecond())
}

// throttledSeconds reads the cgroup's cumulative throttled time (v1 cpu.stat throttled_time).
func throttledSeconds(t *testing.T, cg *testutil.Cgroup) float64 {
	t.Helper()
	return float64(cg.ReadKeyed("cpu", "cpu.stat")["throttled_time"]) / 1e9
}

// glibcArenas counts the workload's arenas, the main one included, with the exporter's
// exact reader (heap headers), which matched glibc's malloc_info in the malloc tests.
func glibcArenas(t *testing.T, s *scenario) int {
	t.Helper()
	pids := s.cg.PIDs()
	if len(pids) == 0 {
		t.Fatalf("%s: no process", s.name)
	}
	st, err := malloc.Inspect(context.Background(), "/proc", pids[0])
	if err != nil {
		t.Fatal(err)
	}
	return st.Arenas + 1
}

// A tenant over the exporter's budgets (real v1 cgroups: 60 below one top-level cgroup, with
// a budget of 10) is named in diagnose's report, live: which budget, what was left out, the
// flag to raise; in JSON of the published schema, with the exit status of a warning.
func TestDiagnoseNamesTenantOverBudget(t *testing.T) {
	bin := buildExporter(t)
	hostile := testutil.NewTopCgroup(t, "overbudget", testutil.CgroupOptions{})
	for i := range 60 {
		hostile.Child(fmt.Sprintf("c%02d", i), testutil.CgroupOptions{QuotaUS: 50000})
	}
	r, code := diagnoseJSON(t, bin, "--duration=2s", "--cgroup.include="+regexp.QuoteMeta(hostile.Path)+"(/.*)?",
		"--budget.cgroups-per-tenant=10", "--budget.sampled-cgroups-per-tenant=5")
	var found []string
	for _, f := range r.Findings {
		if f.Rule != diagnose.RuleBudget || f.Workload != hostile.Path {
			continue
		}
		found = append(found, f.Title)
		switch {
		case strings.Contains(f.Title, "'s cgroups budget"):
			if f.Fix.Settings["--budget.cgroups-per-tenant"] != "60" || f.Evidence[0].Value != 50 {
				t.Errorf("cgroups finding: %+v", f)
			}
		case strings.Contains(f.Title, "sampled cgroups budget"):
			if f.Fix.Settings["--budget.sampled-cgroups-per-tenant"] != "10" {
				t.Errorf("sampled cgroups finding: %+v", f)
			}
		}
	}
	t.Logf("budget findings of %s: %q (exit %d)", hostile.Path, found, code)
	if len(found) < 2 || code != 1 {
		t.Errorf("the tenant over its cgroups and sampled-cgroups budgets is not named: %q, exit %d\n%+v", found, code, r.Findings)
	}
}
