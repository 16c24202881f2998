package jvm

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

var versionLine = regexp.MustCompile(`version "([^"]+)"`)

// printFlagsFinal runs java -XX:+PrintFlagsFinal -version and returns the int flags asked for
// and the Java version.
func printFlagsFinal(java string, args ...string) (map[string]int, Version, error) {
	out, err := exec.Command(java, append(args, "-XX:+PrintFlagsFinal", "-version")...).CombinedOutput()
	if err != nil {
		return nil, Version{}, fmt.Errorf("%v: %v: %s", args, err, out)
	}
	flags := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[2] == "=" {
			if n, err := strconv.Atoi(f[3]); err == nil {
				flags[f[1]] = n
			}
		}
	}
	var v Version
	if m := versionLine.FindStringSubmatch(string(out)); m != nil {
		v, _ = ParseVersion(m[1])
	}
	return flags, v, nil
}

// TestConfiguredThreadsMatchJDK asks the installed JDK what it configures for N CPUs and each
// GC, and compares with ConfiguredThreads.
func TestConfiguredThreadsMatchJDK(t *testing.T) {
	java := testutil.LookPath(t, "java")
	type tc struct {
		gc   GC
		flag string
		n    int
		heap int64
	}
	var cases []tc
	gcs := map[GC]string{GCG1: "-XX:+UseG1GC", GCParallel: "-XX:+UseParallelGC", GCSerial: "-XX:+UseSerialGC",
		GCZ: "-XX:+UseZGC", GCShenandoah: "-XX:+UseShenandoahGC"}
	for gc, flag := range gcs {
		for _, n := range []int{1, 2, 3, 9, 16, 64} {
			cases = append(cases, tc{gc, flag, n, 4 << 30})
		}
	}
	// ZGC's heap cap: 2% of the heap in 2 MiB pages.
	cases = append(cases, tc{GCZ, "-XX:+UseZGC", 16, 64 << 20}, tc{GCZ, "-XX:+UseZGC", 16, 512 << 20})
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			args := []string{"-XX:ActiveProcessorCount=" + strconv.Itoa(c.n), c.flag,
				"-Xmx" + strconv.FormatInt(c.heap>>20, 10) + "m"}
			got, v, err := printFlagsFinal(java, args...)
			if err != nil {
				t.Error(err)
				return
			}
			want := ConfiguredThreads(v, c.gc, c.n, NoFlags(), c.heap)
			if got["ParallelGCThreads"] != want.ParallelGC || got["ConcGCThreads"] != want.ConcurrentGC ||
				got["CICompilerCount"] != want.JIT {
				t.Errorf("%s n=%d heap=%dm (JDK %s): JDK P=%d C=%d CI=%d, computed %+v", c.gc, c.n, c.heap>>20, v,
					got["ParallelGCThreads"], got["ConcGCThreads"], got["CICompilerCount"], want)
			} else {
				t.Logf("%-10s n=%-2d heap=%4dm: ParallelGCThreads=%d ConcGCThreads=%d CICompilerCount=%d", c.gc, c.n,
					c.heap>>20, want.ParallelGC, want.ConcurrentGC, want.JIT)
			}
		}()
	}
	wg.Wait()
}
