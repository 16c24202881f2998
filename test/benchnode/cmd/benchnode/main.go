// Command benchnode measures an exporter on real cgroups (v1, or v2 as in the test VM) (`make bench-node`; root).
//
//	benchnode -exporter bin/quota_exporter -n 100,1000,3000 [-node-exporter bin/node_exporter]
//
// It prints Markdown tables (and JSON with -json) and removes every cgroup and process it
// created, also on SIGINT/SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quota-exporter/quota_exporter/test/benchnode"
)

func main() {
	benchnode.ChildMain()
	var (
		sizes     = flag.String("n", "100,1000,3000", "comma-separated numbers of container cgroups")
		exporter  = flag.String("exporter", "bin/quota_exporter", "exporter binary to measure; several as [name=]path,[name=]path are measured one after the other on the same workload")
		args      = flag.String("exporter-args", "", "extra exporter flags, space-separated (default: none, the exporter's defaults)")
		nodeExp   = flag.String("node-exporter", "", "node_exporter binary to measure side by side (empty: skip)")
		idle      = flag.Duration("idle", 60*time.Second, "window with nobody scraping")
		settle    = flag.Duration("settle", 5*time.Second, "wait after start and after the warm-up scrape")
		scrapes   = flag.Int("scrapes", 10, "scrapes per encoding (plain, gzip)")
		gap       = flag.Duration("scrape-gap", time.Second, "pause between scrapes")
		repeats   = flag.Int("floor-repeats", 5, "read-floor repetitions (median kept)")
		sleepFrac = flag.Float64("sleep-fraction", 0.2, "share of cgroups with a process")
		burners   = flag.Int("burners", 5, "duty-cycled burners that get throttled")
		jvms      = flag.Int("jvms", 2, "JVMs")
		goprogs   = flag.Int("go", 3, "Go programs")
		pprofAddr = flag.String("pprof-addr", "", "the exporter's net/http/pprof address (a profiling build): save CPU profiles of the idle window and of scrapes")
		profDir   = flag.String("out-dir", "", "save each exporter's last plain response (and the -pprof-addr profiles) here")
		profFor   = flag.Duration("profile-scrapes", 20*time.Second, "back-to-back scrapes profiled with -pprof-addr")
		jsonOut   = flag.String("json", "", "also write the results as JSON to this file")
	)
	flag.Parse()
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s benchnode: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	if reason := benchnode.CheckHost(); reason != "" {
		if os.Getenv("CI") == "true" {
			logf("cannot run on CI: %s", reason)
			os.Exit(1)
		}
		logf("skipped: %s", reason)
		return
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			logf("bad -n %q", *sizes)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	self, err := os.Executable()
	if err != nil {
		logf("%v", err)
		os.Exit(1)
	}
	if *pprofAddr != "" && *profDir == "" {
		*profDir = "."
	}
	var targets []benchnode.TargetOptions
	for _, e := range strings.Split(*exporter, ",") {
		name, path, ok := strings.Cut(e, "=")
		if !ok {
			name, path = "quota_exporter", e
			if strings.Contains(*exporter, ",") {
				name = filepath.Base(path)
			}
		}
		bin, _ := filepath.Abs(path)
		targets = append(targets, benchnode.TargetOptions{Name: name, Bin: bin, Args: strings.Fields(*args),
			PprofAddr: *pprofAddr, ProfileDir: *profDir, ProfileScrapes: *profFor})
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	o := benchnode.Options{
		Sizes: ns,
		Workload: benchnode.WorkloadOptions{SleepFraction: *sleepFrac, Burners: *burners, JVMs: *jvms,
			GoPrograms: *goprogs, Self: self},
		Exporters:    targets,
		NodeExporter: *nodeExp,
		Idle:         *idle, Settle: *settle, Scrapes: *scrapes, ScrapeGap: *gap, FloorRepeats: *repeats,
		Logf: logf,
	}
	rs, err := benchnode.Run(ctx, o)
	for _, t := range targets {
		fmt.Printf("%s: %s\n", t.Name, t.Bin)
	}
	benchnode.WriteMarkdown(os.Stdout, rs)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rs, "", "  ")
		if werr := os.WriteFile(*jsonOut, b, 0o644); werr != nil {
			logf("%v", werr)
		}
	}
	if err != nil {
		logf("failed: %v", err)
		os.Exit(1)
	}
}
