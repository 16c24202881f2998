//go:build linux

// Command stalltrace prints every CFS stall the cfsstall program sees for a while, with the
// cgroups' cpu.stat throttling counters read right after attaching and right before
// detaching, and optionally an exporter's stall histograms scraped at both ends: the cgroup
// v2 VM test (test/v2/cfsstall_test.go) compares them over the same window. Usage:
//
//	stalltrace [-mode fentry|kprobe] [-stats] [-scrape URL] -duration 5s /sys/fs/cgroup/a /sys/fs/cgroup/b
//
// Output lines (times are CLOCK_MONOTONIC nanoseconds, as the stalls' ends):
//
//	mode fentry|kprobe
//	cgroup DIR id ID before|after NR_THROTTLED THROTTLED_USEC
//	window NAME FROM TO              cpustat-before, scrape-before, cpustat-after, scrape-after
//	exporter before|after SERIES VALUE   the stall histograms' _count and _sum
//	stall ID NS END RUNQUEUES
//	runs N ns_per_run NS             with -stats: the programs' cost as the kernel counts it
//	lost N
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cfsstall"
)

func main() {
	duration := flag.Duration("duration", 5*time.Second, "how long to trace")
	scrape := flag.String("scrape", "", "an exporter's /metrics URL: its stall histograms' counts and sums are printed at both ends")
	mode := flag.String("mode", "", "fentry or kprobe (default: what cfsstall.Open picks)")
	stats := flag.Bool("stats", false, "enable the kernel's BPF run-time statistics and print the programs' cost")
	flag.Parse()
	if *stats {
		if c, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME); err == nil {
			defer c.Close()
		} else {
			fmt.Println("stats unavailable:", err)
		}
	}
	open := cfsstall.Open
	if *mode != "" {
		open = func() (*cfsstall.Tracer, error) { return cfsstall.OpenMode(cfsstall.Mode(*mode)) }
	}
	t, err := open()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("mode", t.Mode())
	stalls := make(chan cfsstall.Stall, 4096)
	go func() {
		for {
			s, err := t.Read()
			if errors.Is(err, cfsstall.ErrClosed) {
				close(stalls)
				return
			}
			if err == nil {
				stalls <- s
			}
		}
	}()
	dirs := flag.Args()
	window("cpustat-before", func() {
		for _, dir := range dirs {
			var st syscall.Stat_t
			if err := syscall.Stat(dir, &st); err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
			fmt.Println("cgroup", dir, "id", st.Ino, "before", throttled(dir))
		}
	})
	window("scrape-before", func() { printScrape(*scrape, "before") })
	var out []cfsstall.Stall
	deadline := time.After(*duration)
loop:
	for {
		select {
		case s := <-stalls:
			out = append(out, s)
		case <-deadline:
			break loop
		}
	}
	window("cpustat-after", func() {
		for _, dir := range dirs {
			fmt.Println("cgroup", dir, "after", throttled(dir))
		}
	})
	window("scrape-after", func() { printScrape(*scrape, "after") })
	time.Sleep(100 * time.Millisecond) // stalls that ended up to here are still read
	runs, rt, statsErr := t.RunStats()
	lost, _ := t.Lost()
	_ = t.Close()
	for s := range stalls {
		out = append(out, s)
	}
	for _, s := range out {
		fmt.Println("stall", s.CgroupID, s.Duration.Nanoseconds(), s.End.Nanoseconds(), s.RunQueues)
	}
	if statsErr == nil && *stats && runs > 0 {
		fmt.Println("runs", runs, "ns_per_run", rt.Nanoseconds()/int64(runs))
	}
	fmt.Println("lost", lost)
}

func monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// window runs f and prints when it started and ended.
func window(name string, f func()) {
	from := monotonic()
	f()
	fmt.Println("window", name, from, monotonic())
}

// throttled returns cpu.stat's "nr_throttled throttled_usec".
func throttled(dir string) string {
	f, err := os.Open(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return "? ?"
	}
	defer f.Close()
	nr, usec := "?", "?"
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "nr_throttled "); ok {
			nr = v
		}
		if v, ok := strings.CutPrefix(s.Text(), "throttled_usec "); ok {
			usec = v
		}
	}
	return nr + " " + usec
}

// printScrape prints "exporter WHEN SERIES VALUE" for the stall histograms' _count and _sum.
func printScrape(url, when string) {
	if url == "" {
		return
	}
	resp, err := http.Get(url)
	if err != nil {
		fmt.Println("error scraping", err)
		return
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "quota_cpu_throttle_stall_seconds_count{") || strings.HasPrefix(line, "quota_cpu_throttle_stall_seconds_sum{") {
			fmt.Println("exporter", when, line)
		}
	}
}
