//go:build linux

// Command stalltrace prints every CFS stall the cfsstall program sees for a while, with the
// cgroups' nr_throttled read right after attaching and right before detaching: the cgroup
// v2 VM test (test/v2/cfsstall_test.go) compares the two. Usage:
//
//	stalltrace -duration 5s /sys/fs/cgroup/a /sys/fs/cgroup/b
//
// Output lines: "mode M", "cgroup DIR id ID before NR_THROTTLED THROTTLED_USEC", "stall ID NS",
// "cgroup DIR after NR_THROTTLED THROTTLED_USEC", "lost N".
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cfsstall"
)

func main() {
	duration := flag.Duration("duration", 5*time.Second, "how long to trace")
	flag.Parse()
	t, err := cfsstall.Open()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("mode", t.Mode())
	for _, dir := range flag.Args() {
		var st syscall.Stat_t
		if err := syscall.Stat(dir, &st); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("cgroup", dir, "id", st.Ino, "before", throttled(dir))
	}
	stalls := make(chan cfsstall.Stall, 1024)
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
	for _, dir := range flag.Args() {
		fmt.Println("cgroup", dir, "after", throttled(dir))
	}
	lost, _ := t.Lost()
	_ = t.Close()
	for range stalls { // ended after the second nr_throttled read: not counted
	}
	for _, s := range out {
		fmt.Println("stall", s.CgroupID, s.Duration.Nanoseconds())
	}
	fmt.Println("lost", lost)
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
