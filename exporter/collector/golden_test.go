package collector

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the committed host trees and golden exposition files")

// volatile metrics change from run to run; the golden files leave them out.
// quota_exporter_host_pid_namespace is the test's own PID namespace, not the host tree's.
var volatile = regexp.MustCompile(`^quota_exporter_(scrape_collector_duration_seconds|throttle_sampler_seconds_total|host_pid_namespace)$`)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// installHost puts a committed host tree into a temporary directory and returns a Config for it.
func installHost(t testing.TB, h host) Config {
	t.Helper()
	src := filepath.Join("testdata", "hosts", h.name)
	if *update && h.cgroups != nil { // nil: a tree copied from a real host (vmHost)
		os.RemoveAll(src)
		if err := fixture.WriteTemplate(src, h.mode, h.cgroups); err != nil {
			t.Fatal(err)
		}
	}
	dst := t.TempDir()
	if err := fixture.Install(src, dst); err != nil {
		t.Fatal(err)
	}
	cfg := Config{ProcPath: filepath.Join(dst, "proc"), SysPath: filepath.Join(dst, "sys"), ThrottleWindow: time.Second}
	if h.kubelet != nil {
		cfg.PodLogsPath = filepath.Join(dst, "var", "log")
		testutil.WriteKubeletLogs(t, cfg.PodLogsPath, h.kubelet...)
	}
	// A tree recorded from a real node comes with its kubelet's log directories.
	if logs := filepath.Join("testdata", "podlogs-kubelet", h.name, "var", "log"); h.cgroups == nil && isDir(logs) {
		cfg.PodLogsPath = logs
	}
	return cfg
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// scrapeText runs collectors and renders the exposition without volatile metrics.
func scrapeText(t testing.TB, env *Env, cs map[string]Collector) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister((&Set{env: env, collectors: cs}).Bind(context.Background()), env.Errors, env.Discovery)
	return testutil.Exposition(t, reg, volatile)
}

// TestGoldenScrape scrapes each host tree with every cgroup collector and compares the whole
// exposition with testdata/<host>.golden.prom. Run with -update after an intended change.
func TestGoldenScrape(t *testing.T) {
	for _, h := range allHosts() {
		t.Run(h.name, func(t *testing.T) {
			cfg := installHost(t, h)
			env, err := NewEnv(cfg, discardLogger())
			if err != nil {
				t.Fatal(err)
			}
			got := scrapeCgroups(t, env, "binding")
			golden := filepath.Join("testdata", h.name+".golden.prom")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGoldenScrape -update)", err)
			}
			if got != string(want) {
				t.Errorf("scrape differs from %s (go test -run TestGoldenScrape -update to accept):\n%s", golden, lineDiff(string(want), got))
			}
		})
	}
}

// scrapeCgroups scrapes env with the cpu, memory and throttle collectors (and any in more)
// after two sampler windows: the first sets the baseline, between them the quota'd cgroups
// are throttled in 3 of 10 periods for 0.2 s.
func scrapeCgroups(t testing.TB, env *Env, more ...string) string {
	t.Helper()
	cpu, _ := newCPUCollector(env)
	mem, _ := newMemoryCollector(env)
	thr := newThrottleSampler(env, time.Second, nil)
	defer thr.Close()
	thr.sampler.Rediscover(context.Background())
	thr.sampler.Sample(context.Background())
	bumpThrottling(t, env, 10, 3, 0.2)
	thr.sampler.Sample(context.Background())
	cs := map[string]Collector{"cpu": cpu, "memory": mem, "throttle": thr}
	for _, n := range more {
		c, err := registry[n].factory(env)
		if err != nil {
			t.Fatal(err)
		}
		cs[n] = c
	}
	return scrapeText(t, env, cs)
}

// bumpThrottling adds periods, throttled periods and throttled time to every cgroup with a
// quota (and to crun's subgroup with a quota, where the kernel counts the container's).
func bumpThrottling(t testing.TB, env *Env, periods, throttled int, seconds float64) {
	t.Helper()
	l := env.Cgroups.Layout()
	var paths []string
	for _, cg := range cgroups.DiscoverAll(context.Background(), l, cgroups.WalkOptions{}).Cgroups {
		if cg.InCPU && cg.HasCPUMax && cg.CPUMax.Limited() {
			paths = append(paths, cg.Path)
			if cg.ThrottleSubgroup != "" {
				paths = append(paths, cg.ThrottleSubgroup)
			}
		}
	}
	for _, cgPath := range paths {
		p := filepath.Join(l.CPU.Dir(cgPath), "cpu.stat")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			k, v, _ := strings.Cut(line, " ")
			n := mustAtoi(t, v)
			switch k {
			case "nr_periods":
				n += periods
			case "nr_throttled":
				n += throttled
			case "throttled_time":
				n += int(seconds * 1e9)
			case "throttled_usec":
				n += int(seconds * 1e6)
			}
			out = append(out, k+" "+itoa(n))
		}
		if err := os.WriteFile(p, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGoldenPromtool lints the golden expositions with promtool check metrics.
func TestGoldenPromtool(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.golden.prom"))
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		cmd := exec.Command("go", "tool", "-modfile="+filepath.Join(root, "tools", "go.mod"), "promtool", "check", "metrics")
		cmd.Stdin = bytes.NewReader(b)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool check metrics %s: %v\n%s", f, err, out)
		}
	}
}

func lineDiff(want, got string) string {
	w := map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	g := map[string]bool{}
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
	}
	var d []string
	for l := range w {
		if !g[l] {
			d = append(d, "- "+l)
		}
	}
	for l := range g {
		if !w[l] {
			d = append(d, "+ "+l)
		}
	}
	sort.Strings(d)
	if len(d) > 40 {
		d = append(d[:40], "...")
	}
	return strings.Join(d, "\n")
}
