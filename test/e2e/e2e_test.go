// Package e2e is the end-to-end test: the five field reports reproduced by the workloads of
// examples/workloads in real cgroups on this host, laid out as a Kubernetes node's (each workload
// the one container of a pod: kubepods/burstable/pod<uid>/<container id>, the pod limited like
// its container, names from a kubelet log tree), scraped by the real exporter and a real
// Prometheus evaluating the mixin's rules (with a shortened _config), paged through a real
// Alertmanager to a webhook receiver. See stack for the pipeline and cmd/demo for `make demo`.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/e2e/stack"
	"github.com/quota-exporter/quota_exporter/test/testenv"
)

const (
	alertTimeout = 6 * time.Minute   // every expected alert must reach the webhook within this
	minObserve   = 150 * time.Second // the controls are watched at least this long
)

// require is testenv.Require.
var require = testenv.Require

// expectation: the alert (any of names) a scenario must raise, and what its description
// must say. limit is the scenario's CPU limit in cores as the description prints it (%.2g).
type expectation struct {
	scenario string
	names    []string
	process  string // the process label, for per-process alerts
	// cgroupLevel: the alert aggregates its processes away (no process or runtime label).
	cgroupLevel bool
	desc        func(limit string) []*regexp.Regexp
	quotaCores  float64
}

func lit(s string) *regexp.Regexp { return regexp.MustCompile(regexp.QuoteMeta(s)) }

// duration is Prometheus's humanizeDuration of a pause: "98.3ms", "512.7us", "1.234s".
const duration = `[0-9.]+(ms|us|ns|s)`

// key names an expectation: a scenario may expect more than one alert.
func (e expectation) key() string { return e.scenario + " " + strings.Join(e.names, "|") }

func expectations() []expectation {
	cores := func(scenario string, def float64) float64 {
		if us, ok := stack.SmallHostQuotas[scenario]; ok {
			return float64(us) / 100000
		}
		return def
	}
	return []expectation{
		{
			scenario: "jvm-gc-storm", names: []string{"QuotaJVMGCThreadsExceedCPULimit"}, process: "GcStorm",
			quotaCores: cores("jvm-gc-storm", 1),
			desc: func(limit string) []*regexp.Regexp {
				return []*regexp.Regexp{
					lit("18 parallel GC threads against a " + limit + "-core CPU limit in JVM GcStorm of "),
					lit(", which is throttled"),
				}
			},
		},
		{
			scenario: "jvm-warmup", names: []string{"QuotaCPUThrottlingDuringWarmup"},
			quotaCores: cores("jvm-warmup", 1),
			desc: func(limit string) []*regexp.Regexp {
				return []*regexp.Regexp{
					regexp.MustCompile(`was throttled in [0-9.]+% of its CFS periods while its main process warmed up\.$`),
				}
			},
		},
		{
			scenario: "go-gomaxprocs", names: []string{"QuotaGoMaxProcsExceedsCPULimit"}, process: "go-gomaxprocs",
			quotaCores: 0.5,
			desc: func(limit string) []*regexp.Regexp {
				return []*regexp.Regexp{
					regexp.MustCompile(`^GOMAXPROCS=16 against a ` + regexp.QuoteMeta(limit) + `-core CPU limit in Go program go-gomaxprocs of `),
				}
			},
		},
		{
			// The same program's pauses, timed by --collector.gopause: 4 goroutines keep their Ps
			// busy, so every stop-the-world waits for threads the quota has descheduled (seed 004:
			// 50-100+ ms). One alert per container: no process label.
			scenario: "go-gomaxprocs", names: []string{"QuotaGoSTWInflation"}, cgroupLevel: true,
			quotaCores: 0.5,
			desc: func(limit string) []*regexp.Regexp {
				return []*regexp.Regexp{
					regexp.MustCompile(`^The p99 Go stop-the-world pause in container go-gomaxprocs .* was ` + duration + ` over 10 minutes`),
				}
			},
		},
		{
			scenario: "rss-creep", names: []string{"QuotaMallocArenaBloat", "QuotaMemoryCreep"}, process: "rss_creep",
			quotaCores: 1,
			desc: func(limit string) []*regexp.Regexp {
				return []*regexp.Regexp{regexp.MustCompile(
					`^\d+ glibc malloc arenas in rss_creep of .* hold more than [0-9.]+% of its RSS|^The working set of (container|cgroup) `)}
			},
		},
		{
			// The kubelet's case: the container is OOM-killed, its cgroup removed at once, and a new
			// container (new id and cgroup) started in the same pod. The alert names the dead one.
			scenario: "oom-crash", names: []string{"QuotaContainerOOMKilled"},
			quotaCores: 1,
			desc: func(string) []*regexp.Regexp {
				return []*regexp.Regexp{regexp.MustCompile(`^1 process\(es\) in .* were killed by the OOM killer`),
					lit("container oom-crash of pod quota-demo/oom-crash-")}
			},
		},
		{
			scenario: "kernel-contention", names: []string{"QuotaHighSystemCPUUnderQuota"},
			quotaCores: cores("kernel-contention", 1),
			desc: func(limit string) []*regexp.Regexp {
				return []*regexp.Regexp{
					regexp.MustCompile(`^System \(kernel\) time is [0-9.]+% of the CPU time`),
				}
			},
		},
	}
}

func TestEndToEnd(t *testing.T) {
	require(t, os.Geteuid() == 0, "needs root (cgroups, other processes' /proc files)")
	_, err := os.Stat("/sys/fs/cgroup/cpu/cgroup.procs")
	require(t, err == nil, "needs cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu")
	for _, tool := range []string{"java", "javac", "gcc", "go"} {
		_, err := exec.LookPath(tool)
		require(t, err == nil, tool+" not in PATH")
	}
	root := testenv.RepoRoot()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 17*time.Minute) // under go test -timeout 20m; building on a loaded machine takes minutes
	defer cancel()

	st, err := stack.Start(ctx, stack.Options{
		Root:        root,
		Layout:      "kubepods",
		MixinConfig: stack.TestConfig,
		QuotaUS:     stack.SmallHostQuotas,
		// Go pause lengths by uprobes (root here): QuotaGoSTWInflation for go-gomaxprocs.
		ExporterArgs: []string{"--collector.gopause"},
		Logf:         t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Stop(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, st.Cgroup)); err == nil {
				t.Errorf("cgroup %s/%s still exists after Stop", c, st.Cgroup)
			}
		}
	})
	// Ctrl-C or a kill of `go test` must not leave workloads running in our cgroups.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			st.Stop()
			os.Exit(2)
		}
	}()
	up := time.Now()
	t.Logf("stack up after %s: Prometheus %s, Alertmanager %s, exporter %s, webhook %s",
		up.Sub(start).Round(time.Second), st.PromURL, st.AMURL, st.ExporterURL, st.Webhook.URL)

	exps := expectations()
	arrived := map[string]stack.Received{} // expectation key -> first matching alert
	deadline := up.Add(alertTimeout)
	restarted := false
	for {
		if !restarted { // the kubelet's part: restart the OOM-killed container
			if restarted, err = st.RestartIfExited(ctx, "oom-crash"); err != nil {
				t.Errorf("restarting oom-crash: %v", err)
			}
		}
		for _, e := range exps {
			if a, ok := arrived[e.key()]; ok && describes(e, a) {
				continue
			}
			// The first firing alert, or a later one that the expected description fits (an
			// alert with an info and a warning severity may fire as info first, while the
			// workload is not yet throttled).
			for _, a := range st.Webhook.Alerts() {
				if a.Status == "firing" && a.Labels["cgroup"] == st.CgroupOf(e.scenario) && contains(e.names, a.Labels["alertname"]) {
					if _, ok := arrived[e.key()]; ok && !describes(e, a) {
						continue
					}
					arrived[e.key()] = a
					t.Logf("%s: %s arrived at %s after %s", e.scenario, a.Labels["alertname"], a.Path, a.At.Sub(up).Round(time.Second))
					if describes(e, a) {
						break
					}
				}
			}
		}
		if len(arrived) == len(exps) && allDescribed(exps, arrived) && time.Since(up) >= minObserve {
			break
		}
		if gone := st.Exited(); len(gone) > 0 {
			t.Fatalf("stack processes exited: %v", gone)
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("workloads:\n%s", st.Status(ctx))

	t.Run("alerts", func(t *testing.T) {
		for _, e := range exps {
			a, ok := arrived[e.key()]
			if !ok {
				t.Errorf("%s: none of %v reached the webhook within %s; Prometheus: %s", e.scenario, e.names, alertTimeout, describeActive(ctx, st, e.scenario))
				continue
			}
			checkAlert(t, st, e, a)
		}
	})

	t.Run("each alert once", func(t *testing.T) { checkOnce(t, st, exps) })

	t.Run("controls silent", func(t *testing.T) {
		for _, c := range stack.Controls {
			for _, a := range st.Webhook.Alerts() {
				if st.Owns(c, a.Labels["cgroup"]) {
					t.Errorf("control %s raised %s (%s): %s", c, a.Labels["alertname"], a.Status, a.Annotations["description"])
				}
			}
			active, err := st.Alerts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range active {
				if st.Owns(c, a.Labels["cgroup"]) {
					if a.State == "firing" {
						t.Errorf("control %s: %s firing in Prometheus: %s", c, a.Labels["alertname"], a.Annotations["description"])
					} else {
						t.Logf("control %s: %s %s (not firing)", c, a.Labels["alertname"], a.State)
					}
				}
			}
		}
	})

	t.Run("go pauses", func(t *testing.T) { checkGoPauses(ctx, t, st) })

	t.Run("dashboards", func(t *testing.T) { checkDashboards(ctx, t, root, st) })

	// The record: everything the receiver got.
	var lines []string
	for _, a := range st.Webhook.Alerts() {
		lines = append(lines, fmt.Sprintf("+%s %s %s %s cgroup=%s %s/%s/%s process=%s severity=%s\n    %s\n    %s",
			a.At.Sub(up).Round(time.Second), a.Path, a.Status, a.Labels["alertname"], a.Labels["cgroup"],
			a.Labels["namespace"], a.Labels["pod"], a.Labels["container"], a.Labels["process"],
			a.Labels["severity"], a.Annotations["summary"], a.Annotations["description"]))
	}
	t.Logf("webhook received %d alerts:\n%s", len(lines), strings.Join(lines, "\n"))
	t.Logf("total %s", time.Since(start).Round(time.Second))
}

// checkOnce: each problem pages once, at the level where it is. For every scenario with an
// expected alert, each alert name it raised carries one label set only (the container's, with
// its names; never the pod's as well), and nothing fires for the node-level slices
// (<parent>/kubepods, <parent>/kubepods/burstable).
func checkOnce(t *testing.T, st *stack.Stack, exps []expectation) {
	t.Helper()
	for _, e := range exps {
		sets := map[string]map[string]bool{} // alertname -> distinct label sets
		for _, a := range st.Webhook.Alerts() {
			if !st.Owns(e.scenario, a.Labels["cgroup"]) {
				continue
			}
			name := a.Labels["alertname"]
			if sets[name] == nil {
				sets[name] = map[string]bool{}
			}
			sets[name][labelKey(a.Labels)] = true
			if a.Labels["cgroup"] != st.CgroupOf(e.scenario) {
				t.Errorf("%s: %s fired for %s, not for the container %s: %v", e.scenario, name, a.Labels["cgroup"], st.CgroupOf(e.scenario), a.Labels)
			}
		}
		for name, ls := range sets {
			if len(ls) > 1 {
				t.Errorf("%s: %s arrived for %d label sets, want 1: %v", e.scenario, name, len(ls), keys(ls))
			}
		}
	}
	for _, a := range st.Webhook.Alerts() {
		if c := a.Labels["cgroup"]; strings.HasPrefix(c, "/"+st.Cgroup) && !strings.Contains(c, "/pod") && c != "/"+st.Cgroup+"/" {
			if strings.Contains(c, "/kubepods") {
				t.Errorf("%s fired for the node-level slice %s", a.Labels["alertname"], c)
			}
		}
	}
}

// labelKey is an alert's label set without severity (one problem may change severity).
func labelKey(l map[string]string) string {
	var parts []string
	for k, v := range l {
		if k != "severity" {
			parts = append(parts, k+"="+v)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkAlert checks labels (cgroup, process, job, instance), routing and the description.
// describes reports whether a's description fits every pattern e expects.
func describes(e expectation, a stack.Received) bool {
	for _, re := range e.desc(fmt.Sprintf("%.2g", e.quotaCores)) {
		if !re.MatchString(a.Annotations["description"]) {
			return false
		}
	}
	return true
}

// allDescribed reports whether every arrived alert fits its expected description.
func allDescribed(exps []expectation, arrived map[string]stack.Received) bool {
	for _, e := range exps {
		if a, ok := arrived[e.key()]; ok && !describes(e, a) {
			return false
		}
	}
	return true
}

func checkAlert(t *testing.T, st *stack.Stack, e expectation, a stack.Received) {
	t.Helper()
	name := a.Labels["alertname"]
	id := st.IdentOf(e.scenario)
	want := map[string]string{"cgroup": id.Cgroup, "job": "quota-exporter", "instance": st.Instance,
		"namespace": id.Namespace, "pod": id.Pod, "container": id.Container}
	if e.process != "" && !e.cgroupLevel && name != "QuotaHighSystemCPUUnderQuota" && name != "QuotaCPUThrottlingDuringWarmup" {
		want["process"] = e.process
		want["runtime"] = map[string]string{"GcStorm": "jvm", "go-gomaxprocs": "go", "rss_creep": "other"}[e.process]
	}
	if e.cgroupLevel {
		want["process"], want["runtime"] = "", "" // absent
	}
	for k, v := range want {
		if a.Labels[k] != v {
			t.Errorf("%s %s: label %s=%q, want %q (labels %v)", e.scenario, name, k, a.Labels[k], v, a.Labels)
		}
	}
	wantPath := map[string]string{"warning": "/alerts", "critical": "/alerts", "info": "/info"}[a.Labels["severity"]]
	if wantPath == "" || a.Path != wantPath {
		t.Errorf("%s %s: severity %q delivered to %s, want %s", e.scenario, name, a.Labels["severity"], a.Path, wantPath)
	}
	desc := a.Annotations["description"]
	limit := fmt.Sprintf("%.2g", e.quotaCores)
	for _, re := range e.desc(limit) {
		if !re.MatchString(desc) {
			t.Errorf("%s %s: description does not match %q:\n%s", e.scenario, name, re, desc)
		}
	}
	// A template lookup that found nothing prints "?": every number must have been found.
	if strings.Contains(desc, "?") {
		t.Errorf("%s %s: description has an unresolved value (?):\n%s", e.scenario, name, desc)
	}
	if a.Annotations["summary"] == "" || !strings.Contains(a.Annotations["runbook_url"], strings.ToLower(name)) {
		t.Errorf("%s %s: summary %q, runbook_url %q", e.scenario, name, a.Annotations["summary"], a.Annotations["runbook_url"])
	}
	t.Logf("%s: %s\n    %s", e.scenario, name, desc)
}

// checkGoPauses: the uprobes were attached to both Go programs, and the record of their
// pause tails (the alert's p99 over 10 minutes, and the median) for the report.
func checkGoPauses(ctx context.Context, t *testing.T, st *stack.Stack) {
	t.Helper()
	res, err := st.Query(ctx, `max(quota_exporter_gopause_available)`)
	if err != nil || len(res) == 0 || res[0].Value != 1 {
		t.Fatalf("--collector.gopause is not available (uprobes need root and a kernel with uprobes): %v %v; see %s", res, err, st.LogPath("exporter"))
	}
	for _, sc := range []string{"go-gomaxprocs", "go-healthy"} {
		var figures []string
		for _, q := range []string{"p99_10m", "p50_10m"} {
			res, err := st.Query(ctx, fmt.Sprintf(`process:quota_go_stw_pause_seconds:%s{cgroup=%q}`, q, st.CgroupOf(sc)))
			if err != nil || len(res) == 0 {
				t.Errorf("%s: no %s pause series (%v): were the uprobes attached?", sc, q, err)
				continue
			}
			figures = append(figures, fmt.Sprintf("%s %.3g ms", q, res[0].Value*1000))
		}
		res, err := st.Query(ctx, fmt.Sprintf(`sum(quota_go_stw_pause_seconds_count{cgroup=%q})`, st.CgroupOf(sc)))
		if err == nil && len(res) > 0 {
			figures = append(figures, fmt.Sprintf("%.0f pauses", res[0].Value))
		}
		t.Logf("%s: stop-the-world %s", sc, strings.Join(figures, ", "))
	}
}

// describeActive is Prometheus's view of a scenario's alerts, for failure messages.
func describeActive(ctx context.Context, st *stack.Stack, scenario string) string {
	active, err := st.Alerts(ctx)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, a := range active {
		if st.Owns(scenario, a.Labels["cgroup"]) {
			out = append(out, fmt.Sprintf("%s %s since %s", a.Labels["alertname"], a.State, a.ActiveAt.Format(time.TimeOnly)))
		}
	}
	if len(out) == 0 {
		return "no active alert for " + st.CgroupOf(scenario)
	}
	return strings.Join(out, "; ")
}

// ---- dashboards ----

// mayBeEmpty lists dashboard queries (by a metric or rule name they use) that may return
// nothing on this stack, and why. Everything else must return data.
var mayBeEmpty = map[string]string{
	"quota_cpu_pressure_waiting_seconds_total":    "PSI (cpu.pressure) exists on cgroup v2 only; the workloads run in v1 cgroups",
	"quota_cpu_pressure_stalled_seconds_total":    "PSI (cpu.pressure) exists on cgroup v2 only; the workloads run in v1 cgroups",
	"quota_memory_pressure_waiting_seconds_total": "PSI (memory.pressure) exists on cgroup v2 only; the workloads run in v1 cgroups",
	"quota_memory_pressure_stalled_seconds_total": "PSI (memory.pressure) exists on cgroup v2 only; the workloads run in v1 cgroups",
	"go_gc_pauses_seconds_bucket":                 "the application's own Go runtime histogram (goGCPausesSelector): the stack scrapes only quota_exporter",
	"go_sched_gomaxprocs_threads":                 "the application's own Go runtime metrics (goRuntimeSelector): the stack scrapes only quota_exporter",
	"go_sched_pauses_total_gc_seconds":            "the application's own Go runtime metrics (goRuntimeSelector): the stack scrapes only quota_exporter",
	"quota_cpu_period_seconds":                    "exported only when the period differs from the kernel's 0.1 s default (series budget); the workloads use the default",
	"quota_cpu_burst_limit_cores":                 "exported only where a burst allowance is set; none of the workloads has one",
	"quota_cpu_burst_seconds_total":               "exported only where a burst allowance is set; none of the workloads has one",
	"quota_cpu_cpuset_cpus":                       "exported only when a cgroup's cpuset differs from the root's; the workloads may run on every CPU",
	"quota_cpu_throttle_stall_seconds_bucket":     "--collector.cfsstall (kernel BPF) is off by default, and this host's kernel refuses it; measured in the v2 VM (test/v2 TestCFSStallLengths)",
}

// substitute replaces Grafana's interval macros and the dashboards' template variables with
// values that select this stack's series, as Grafana would with "All" for the filters.
func substitute(expr string, st *stack.Stack) string {
	vars := map[string]string{
		"__rate_interval": "1m", // Grafana: max(4 x scrape interval, $__interval + scrape interval)
		"__interval":      "15s",
		"__range":         "5m",
		"datasource":      "prometheus",
		"job":             "quota-exporter",
		"instance":        st.Instance, // "." in a regexp also matches itself
		"cgroup":          "/" + st.Cgroup + "(/.*)?",
		"namespace":       ".*", // "All"
		"pod":             ".*",
		"container":       ".*",
	}
	re := regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)`)
	return re.ReplaceAllStringFunc(expr, func(m string) string {
		sub := re.FindStringSubmatch(m)
		name := sub[1] + sub[2] + sub[3]
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}

type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

func checkDashboards(ctx context.Context, t *testing.T, root string, st *stack.Stack) {
	files, _ := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	if len(files) == 0 {
		t.Fatal("no dashboards/*.json")
	}
	total, empty := 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []panel `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				walk(p.Panels)
				for _, tg := range p.Targets {
					if strings.TrimSpace(tg.Expr) == "" {
						continue
					}
					total++
					q := substitute(tg.Expr, st)
					where := fmt.Sprintf("%s / %q / %s", filepath.Base(f), p.Title, tg.RefID)
					if templateVariable.MatchString(q) {
						t.Errorf("%s: unknown template variable left in %s", where, q)
						continue
					}
					res, err := st.Query(ctx, q)
					if err != nil {
						t.Errorf("%s: %v\n%s", where, err, q)
						continue
					}
					if len(res) > 0 {
						continue
					}
					empty++
					if reason := allowedEmpty(q); reason != "" {
						t.Logf("%s: empty, allowed: %s", where, reason)
					} else {
						t.Errorf("%s: no data\n%s", where, q)
					}
				}
			}
		}
		walk(d.Panels)
	}
	t.Logf("%d dashboard queries, %d empty", total, empty)
}

func allowedEmpty(q string) string {
	var keys []string
	for k := range mayBeEmpty {
		if strings.Contains(q, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return ""
	}
	return mayBeEmpty[keys[0]]
}

// templateVariable matches a Grafana variable left after substitution ($name, ${name}); "$1" in
// a label_replace replacement is a regexp group, not a variable.
var templateVariable = regexp.MustCompile(`\$[A-Za-z_{]`)
