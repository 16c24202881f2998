// Command demo is `make demo`: the five field reports happen on this host (root) and their
// alerts arrive. It starts the workloads of examples/workloads in their own cgroups, the
// exporter, Prometheus with the mixin's rules and Alertmanager on loopback (stack package),
// prints where to look, streams every alert Alertmanager delivers to its webhook, and removes
// every process and cgroup on Ctrl-C or after -duration.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/quota-exporter/quota_exporter/test/e2e/stack"
)

func main() {
	root := flag.String("root", "..", "repository root")
	duration := flag.Duration("duration", 0, "stop after this long (0: run until Ctrl-C)")
	config := flag.String("config", "demo", "mixin _config: demo (shipped thresholds and windows, `for` cut to 1m), "+
		"test (the end-to-end test's: everything within ~3 minutes), or default (as shipped: alerts after 10-30 minutes)")
	small := flag.Bool("small-quotas", runtime.NumCPU() < 4, "give the throttling scenarios 0.3-core quotas so they are "+
		"throttled on a small host where all workloads share few cores (default: on with fewer than 4 CPUs)")
	flag.Parse()
	if err := run(*root, *duration, *config, *small); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(root string, duration time.Duration, config string, small bool) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root: it creates cgroups and reads other processes' /proc files (sudo make demo)")
	}
	cfgs := map[string]map[string]any{"demo": stack.DemoConfig, "test": stack.TestConfig, "default": nil}
	cfg, ok := cfgs[config]
	if !ok {
		return fmt.Errorf("-config %q: want demo, test or default", config)
	}
	scrape := 5 * time.Second
	if config == "test" {
		scrape = time.Second
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	var quotas map[string]int
	if small {
		quotas = stack.SmallHostQuotas
	}
	started := time.Now()
	logf := func(format string, args ...any) {
		fmt.Printf("[%5s] %s\n", time.Since(started).Round(time.Second), fmt.Sprintf(format, args...))
	}
	printAlert := func(a stack.Received) {
		who := a.Labels["cgroup"]
		if p := a.Labels["process"]; p != "" {
			who += " process " + p
		}
		fmt.Printf("\n[%5s] ALERT %s %s (%s) -> webhook %s\n        %s\n        %s\n        %s\n\n",
			time.Since(started).Round(time.Second), strings.ToUpper(a.Status), a.Labels["alertname"], a.Labels["severity"],
			a.Path, who, a.Annotations["summary"], wrap(a.Annotations["description"], 100, "        "))
	}

	logf("starting (config %s, small-host quotas %v); the first run builds the workloads and takes a minute", config, small)
	st, err := stack.Start(ctx, stack.Options{
		Root: root, Prefix: "quota-demo-stack", MixinConfig: cfg, QuotaUS: quotas,
		ScrapeInterval: scrape, EvalInterval: scrape, SmapsInterval: 30 * time.Second,
		ExporterArgs: []string{"--collector.gopause"}, // Go pause lengths (uprobes; the demo runs as root)
		OnAlert:      printAlert, Logf: logf,
	})
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping: workloads and their cgroups, Prometheus, Alertmanager, exporter")
		if err := st.Stop(); err != nil {
			logf("cleanup: %v", err)
		} else {
			logf("everything removed")
		}
	}()

	fmt.Printf(`
== quota_exporter demo ==============================================================
Workloads (one cgroup each, /sys/fs/cgroup/{cpu,cpuacct,cpuset,memory}/%[1]s/<scenario>):
  jvm-gc-storm       18 parallel GC threads (-XX:ActiveProcessorCount=24) in a small quota
  jvm-warmup         JIT-heavy start in a small quota         -> QuotaCPUThrottlingDuringWarmup
  go-gomaxprocs      GOMAXPROCS=16 in a 0.5-core quota        -> QuotaGoMaxProcsExceedsCPULimit,
                                                                 QuotaGoSTWInflation (pauses via --collector.gopause)
  rss-creep          32 threads, default glibc arenas         -> QuotaMallocArenaBloat (info)
  kernel-contention  32 threads read()ing one file            -> QuotaHighSystemCPUUnderQuota (info)
  (jvm-gc-storm                                               -> QuotaJVMGCThreadsExceedCPULimit)
  controls, which should stay silent: jvm-healthy, go-healthy, rss-creep-control (MALLOC_ARENA_MAX=2)

Where to look:
  exporter      curl -s %[2]s/metrics | grep '^quota_'
  Prometheus    curl -s '%[3]s/api/v1/alerts' | jq .
                curl -s '%[3]s/api/v1/query' --data-urlencode 'query=cgroup:quota_cpu_throttled_periods:ratio_rate5m'
  Alertmanager  curl -s '%[4]s/api/v2/alerts' | jq .
  webhook       %[5]s/alerts (warning) and /info (info): printed below as they arrive
  workloads     QUOTA_DEMO_DIR=%[6]s/workloads QUOTA_DEMO_CGROUP=%[1]s %[7]s/examples/workloads/run.sh status
  logs          %[6]s/logs, %[6]s/workloads/logs
Alerts fire after their 'for' (%[8]s); Ctrl-C stops and removes everything.
======================================================================================

`, st.Cgroup, st.ExporterURL, st.PromURL, st.AMURL, st.Webhook.URL, st.Dir, root, forSummary(cfg))

	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			fmt.Println()
			return nil
		case <-tick.C:
			if gone := st.Exited(); len(gone) > 0 {
				return fmt.Errorf("stack processes exited: %v (logs in %s/logs)", gone, st.Dir)
			}
			if s := pending(ctx, st); s != last && s != "" {
				logf("Prometheus: %s", s)
				last = s
			}
		}
	}
}

// pending summarises Prometheus's active alerts by state.
func pending(ctx context.Context, st *stack.Stack) string {
	alerts, err := st.Alerts(ctx)
	if err != nil {
		return ""
	}
	var parts []string
	for _, a := range alerts {
		parts = append(parts, fmt.Sprintf("%s %s %s", a.State, a.Labels["alertname"], strings.TrimPrefix(a.Labels["cgroup"], "/"+st.Cgroup+"/")))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "no alerts pending or firing yet"
	}
	return strings.Join(parts, "; ")
}

func forSummary(cfg map[string]any) string {
	if cfg == nil {
		return "as shipped: 2-30 minutes"
	}
	seen := map[string]bool{}
	var out []string
	for k, v := range cfg {
		if strings.HasSuffix(k, "For") && !seen[fmt.Sprint(v)] {
			seen[fmt.Sprint(v)] = true
			out = append(out, fmt.Sprint(v))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func wrap(s string, width int, indent string) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n"+indent)
}
