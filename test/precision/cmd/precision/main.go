// Command precision runs issue 25's archetypes live (make bench-precision, make
// record-workloads; root): each the one container of its own kubepods-style pod in real v1
// cgroups, the exporter scraped every -interval by a real Prometheus that evaluates the
// rendered rules and kubernetes-mixin's CPUThrottlingHigh expression over the exporter's
// counters. With -baseline-exporter and -baseline-rules a second exporter and Prometheus watch
// the same cgroups with another build's rules (the before of a change). With -record it
// writes the exporter's expositions (timestamps kept) and a manifest: the fixtures of the
// replay test. At the end it prints, per archetype, what paged, what was info, and what
// CPUThrottlingHigh did, as a markdown table.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quota-exporter/quota_exporter/test/e2e/stack"
	"github.com/quota-exporter/quota_exporter/test/internal/runner"
	"github.com/quota-exporter/quota_exporter/test/precision"
)

// cpuThrottlingHigh is kubernetes-mixin's alert (alerts/resource_alerts.libsonnet) with
// cAdvisor's container_cpu_cfs_* replaced by the exporter's counters of the same cpu.stat
// fields, per container cgroup.
const cpuThrottlingHigh = `groups:
  - name: kubernetes-mixin-equivalent
    rules:
      - alert: CPUThrottlingHigh
        expr: |
          sum without (mode) (increase(quota_cpu_throttled_periods_total{container_id!=""}[5m]))
            / on (job, instance, cgroup)
          sum without (mode) (increase(quota_cpu_periods_total{container_id!=""}[5m]))
            > (25 / 100)
        for: 15m
        labels:
          severity: info
`

type arm struct {
	name              string
	exporter, rules   string
	instance, promURL string
	promDir           string
}

func main() {
	root := flag.String("root", "..", "repository root")
	duration := flag.Duration("duration", 22*time.Minute, "how long the workloads run (>= 20m for the rules' real for durations)")
	interval := flag.Duration("interval", 15*time.Second, "scrape and rule evaluation interval")
	record := flag.String("record", "", "directory for the recording (recording.txt.gz, manifest.json)")
	baseExporter := flag.String("baseline-exporter", "", "exporter binary of the baseline (before) build")
	baseRules := flag.String("baseline-rules", "", "directory with the baseline's rendered quota-*.yaml")
	out := flag.String("out", "", "also write the markdown table here")
	group := flag.Int("group", 0, "run only the archetypes of this group (precision.Archetypes' Group; 0: all at once)")
	shares := flag.Int("shares", 262144, "cpu.shares of the parent cgroup: the workloads' weight against the host's other work")
	keep := flag.Bool("keep", false, "keep the scratch directory")
	flag.Parse()
	log.SetFlags(log.Ltime)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			log.Fatal("precision: needs root (creates v1 cgroups)")
		}
		log.Print("precision: skipped: needs root (creates v1 cgroups)")
		return
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, *root, *duration, *interval, *record, *baseExporter, *baseRules, *out, *group, *shares, *keep); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, root string, duration, interval time.Duration, record, baseExporter, baseRules, out string, group, shares int, keep bool) (err error) {
	root, err = filepath.Abs(root)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "quota-precision-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	parent := fmt.Sprintf("quota-precision-%d", os.Getpid())
	infra := parent + "-infra"
	runSh := filepath.Join(root, "examples", "workloads", "run.sh")
	podlogs := filepath.Join(dir, "podlogs")
	env := append(os.Environ(), "QUOTA_DEMO_DIR="+filepath.Join(dir, "workloads"), "QUOTA_DEMO_CGROUP="+parent,
		"QUOTA_DEMO_PODLOGS="+podlogs, "QUOTA_DEMO_LAYOUT=kubepods")
	for name, us := range precision.QuotaUS {
		env = append(env, fmt.Sprintf("QUOTA_US_%s=%d", strings.ReplaceAll(name, "-", "_"), us))
	}
	scenarios := precision.Scenarios(group)
	sh := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, runSh, append(args, scenarios...)...)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		if err != nil {
			return b, fmt.Errorf("run.sh %s: %w\n%s", args[0], err, b)
		}
		return b, nil
	}

	log.Printf("building the exporter and the workloads in %s", dir)
	exporter := filepath.Join(dir, "quota_exporter")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", exporter, "./exporter/cmd/quota_exporter")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, b)
	}
	if _, err := sh("build"); err != nil {
		return err
	}
	rules := filepath.Join(dir, "rules")
	if err := copyRules(filepath.Join(root, "alerts"), rules); err != nil {
		return err
	}
	arms := []*arm{{name: "after", exporter: exporter, rules: rules}}
	if baseExporter != "" {
		arms = append(arms, &arm{name: "before", exporter: baseExporter, rules: baseRules})
	}
	promBin, err := stack.ToolPath(ctx, root, "tools", "prometheus")
	if err != nil {
		return err
	}

	var procs []*exec.Cmd
	defer func() {
		log.Print("stopping the workloads and removing their cgroups")
		cmd := exec.Command(runSh, append([]string{"stop"}, scenarios...)...)
		cmd.Env = env
		if b, err := cmd.CombinedOutput(); err != nil {
			log.Printf("run.sh stop: %v\n%s", err, b)
		}
		for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory"} {
			os.Remove(filepath.Join("/sys/fs/cgroup", c, parent))
		}
		for i := len(procs) - 1; i >= 0; i-- {
			_ = syscall.Kill(-procs[i].Process.Pid, syscall.SIGTERM)
			_ = procs[i].Wait()
		}
		os.Remove(filepath.Join("/sys/fs/cgroup/cpu", infra))
	}()
	start := func(name, bin string, args ...string) error {
		f, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return err
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = f, f
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return err
		}
		procs = append(procs, cmd)
		log.Printf("%s: pid %d", name, cmd.Process.Pid)
		// The exporters and Prometheus get the workloads' weight too: a DaemonSet with requests
		// on a busy node, not a task behind the host's builds (their per-second windows and
		// evaluations on time). A sibling cgroup the exporters' --cgroup.include leaves out.
		if err := os.WriteFile(filepath.Join("/sys/fs/cgroup/cpu", infra, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			log.Printf("%s: not moved into %s: %v", name, infra, err)
		}
		return nil
	}

	// The parent cgroup's weight: the workloads get their quotas' worth of CPU before the
	// host's other work, as pods with requests do on a node.
	for _, cg := range []string{parent, infra} {
		if err := os.MkdirAll(filepath.Join("/sys/fs/cgroup/cpu", cg), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join("/sys/fs/cgroup/cpu", cg, "cpu.shares"), []byte(strconv.Itoa(shares)), 0o644); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(podlogs, 0o755); err != nil {
		return err
	}
	for _, a := range arms {
		port, err := freePort()
		if err != nil {
			return err
		}
		a.instance = fmt.Sprintf("127.0.0.1:%d", port)
		if err := start("exporter-"+a.name, a.exporter, "--web.listen-address="+a.instance,
			"--cgroup.include=/"+regexp.QuoteMeta(parent)+"(/.*)?", "--path.podlogs="+podlogs); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(a.rules, "..", "k8s-"+a.name+".yaml"), []byte(cpuThrottlingHigh), 0o644); err != nil {
			return err
		}
		a.promDir = filepath.Join(dir, "prometheus-"+a.name)
		if err := os.MkdirAll(a.promDir, 0o755); err != nil {
			return err
		}
		cfg := fmt.Sprintf("global:\n  scrape_interval: %[1]s\n  evaluation_interval: %[1]s\nrule_files:\n  - %[2]q\n  - %[3]q\n"+
			"scrape_configs:\n  - job_name: quota-exporter\n    scrape_timeout: %[1]s\n    static_configs:\n      - targets: [%[4]q]\n",
			interval, filepath.Join(a.rules, "quota-*.yaml"), filepath.Join(a.rules, "..", "k8s-"+a.name+".yaml"), a.instance)
		if err := os.WriteFile(filepath.Join(a.promDir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
			return err
		}
		pport, err := freePort()
		if err != nil {
			return err
		}
		a.promURL = fmt.Sprintf("http://127.0.0.1:%d", pport)
		if err := start("prometheus-"+a.name, promBin, "--config.file="+filepath.Join(a.promDir, "prometheus.yml"),
			"--storage.tsdb.path="+filepath.Join(a.promDir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", pport)); err != nil {
			return err
		}
	}
	for _, a := range arms {
		if err := waitOK(ctx, "http://"+a.instance+"/metrics"); err != nil {
			return fmt.Errorf("exporter %s: %w", a.name, err)
		}
		if err := waitOK(ctx, a.promURL+"/-/ready"); err != nil {
			return fmt.Errorf("prometheus %s: %w", a.name, err)
		}
	}

	idents := map[string]precision.Identity{}
	b, err := sh("ident")
	if err != nil {
		return err
	}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || i >= len(scenarios) {
			return fmt.Errorf("run.sh ident: %q", line)
		}
		idents[scenarios[i]] = precision.Identity{Cgroup: f[0], Namespace: f[1], Pod: f[2], Container: f[3]}
	}
	log.Printf("starting %d workloads under /sys/fs/cgroup/*/%s (kubepods layout) for %s", len(scenarios), parent, duration)
	if _, err := sh("start"); err != nil {
		return err
	}
	began := time.Now()

	var rec *precision.Recorder
	if record != "" {
		if err := os.MkdirAll(record, 0o755); err != nil {
			return err
		}
		if rec, err = precision.NewRecorder(filepath.Join(record, "recording.txt.gz")); err != nil {
			return err
		}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	next := time.Now()
	for time.Since(began) < duration {
		if rec != nil {
			at := time.Now()
			if body, err := get(ctx, "http://"+arms[0].instance+"/metrics"); err != nil {
				log.Printf("recording: scrape failed: %v", err)
			} else if err := rec.Add(at, body); err != nil {
				return err
			}
		}
		if id, ok := idents["oom-crash"]; ok {
			restartExited(ctx, runSh, env, "oom-crash", id.Cgroup)
		}
		if time.Now().After(next) {
			log.Printf("%s of %s", time.Since(began).Round(time.Second), duration)
			next = time.Now().Add(2 * time.Minute)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	if rec != nil {
		if err := rec.Close(); err != nil {
			return err
		}
		rev, _ := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
		m := precision.Manifest{Started: began.UTC(), Interval: interval.String(), Duration: duration.String(),
			Revision: strings.TrimSpace(string(rev)), Instance: arms[0].instance, Scenarios: idents,
			Note: "recorded by make record-workloads (test/precision/cmd/precision)"}
		b, _ := json.MarshalIndent(m, "", "  ")
		if err := os.WriteFile(filepath.Join(record, "manifest.json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}

	// One more evaluation so the last samples count, then the tables.
	time.Sleep(interval + 2*time.Second)
	var report strings.Builder
	fmt.Fprintf(&report, "Live run: %s, %d archetypes at once, scrape and evaluation every %s, started %s.\n\n",
		duration, len(scenarios), interval, began.UTC().Format(time.RFC3339))
	for _, a := range arms {
		t, err := table(ctx, a, idents, time.Since(began))
		if err != nil {
			return err
		}
		fmt.Fprintf(&report, "**%s** (exporter %s, rules %s)\n\n%s\n", a.name, filepath.Base(a.exporter), a.rules, t)
	}
	fmt.Print(report.String())
	if out != "" {
		return os.WriteFile(out, []byte(report.String()), 0o644)
	}
	return nil
}

// table is one arm's result per archetype: the kernel's throttled share (the worse of the
// container's and the pod's counters over the run), what paged, what was info, CPUThrottlingHigh.
func table(ctx context.Context, a *arm, idents map[string]precision.Identity, over time.Duration) (string, error) {
	rng := fmt.Sprintf("%ds", int(over.Seconds()))
	share, err := query(ctx, a.promURL, fmt.Sprintf(`increase(quota_cpu_throttled_periods_total[%[1]s]) / increase(quota_cpu_periods_total[%[1]s])`, rng))
	if err != nil {
		return "", err
	}
	// When each alert first fired (seconds after the run's start) and its labels.
	fired, err := query(ctx, a.promURL, fmt.Sprintf(`min_over_time(timestamp(ALERTS{alertstate="firing"})[%s:15s])`, rng))
	if err != nil {
		return "", err
	}
	began := time.Now().Add(-over)
	var b strings.Builder
	b.WriteString("| archetype | periods throttled (worse level) | pages (warning) | info | CPUThrottlingHigh (info) |\n|---|---|---|---|---|\n")
	for _, arch := range precision.Archetypes {
		id, ok := idents[arch.Scenario]
		if !ok {
			continue
		}
		pod := filepath.Dir(id.Cgroup)
		worse := 0.0
		for _, s := range share {
			if c := s.labels["cgroup"]; c == id.Cgroup || c == pod {
				worse = max(worse, s.value)
			}
		}
		var pages, info, k8s []string
		for _, s := range fired {
			c := s.labels["cgroup"]
			if c != pod && !strings.HasPrefix(c, pod+"/") && !(s.labels["pod"] == id.Pod && id.Pod != "") {
				continue
			}
			at := fmt.Sprintf("%s at %.0f min", s.labels["alertname"], time.Unix(int64(s.value), 0).Sub(began).Minutes())
			switch {
			case s.labels["alertname"] == "CPUThrottlingHigh":
				k8s = append(k8s, fmt.Sprintf("at %.0f min", time.Unix(int64(s.value), 0).Sub(began).Minutes()))
			case precision.Pages(s.labels["severity"]):
				pages = append(pages, at)
			default:
				info = append(info, at)
			}
		}
		for _, l := range [][]string{pages, info, k8s} {
			sort.Strings(l)
		}
		fmt.Fprintf(&b, "| %s | %.0f%% | %s | %s | %s |\n", arch.What, 100*worse, orNone(pages), orNone(info), orNone(k8s))
	}
	return b.String(), nil
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "-"
	}
	return strings.Join(l, ", ")
}

type sample struct {
	labels map[string]string
	value  float64
}

func query(ctx context.Context, promURL, q string) ([]sample, error) {
	body, err := get(ctx, promURL+"/api/v1/query?query="+url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	if resp.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, resp.Error)
	}
	var out []sample
	for _, r := range resp.Data.Result {
		s, _ := r.Value[1].(string)
		v, _ := strconv.ParseFloat(s, 64)
		out = append(out, sample{labels: r.Metric, value: v})
	}
	return out, nil
}

// restartExited restarts a scenario's container once nothing runs in it, as the kubelet does
// after an OOM kill (new container id and cgroup in the same pod).
func restartExited(ctx context.Context, runSh string, env []string, scenario, cgroup string) {
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", cgroup, "cgroup.procs"))
	if err != nil || strings.TrimSpace(string(b)) != "" {
		return
	}
	cmd := exec.CommandContext(ctx, runSh, "restart", scenario)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		log.Printf("run.sh restart %s: %v\n%s", scenario, err, out)
	} else {
		log.Printf("%s: its container exited; restarted it as the kubelet would", scenario)
	}
}

func copyRules(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"quota-alerts.yaml", "quota-rules.yaml"} {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func get(ctx context.Context, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func waitOK(ctx context.Context, u string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := get(ctx, u); err == nil {
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within 2m", u)
}

// freePort is runner.FreePort.
var freePort = runner.FreePort
