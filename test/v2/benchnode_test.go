package v2

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
	"github.com/quota-exporter/quota_exporter/test/v2/vm"
)

// TestBenchNodeInVM runs the real-node benchmark (test/benchnode, `make bench-node`) inside
// the v2 VM: N real cgroup v2 quota cgroups (default 1 000) under the VM's own cgroup2 mount,
// the exporter with its defaults, and the read floor of the same v2 files, measured in the
// same run. It is a benchmark, not a test: `make bench-node-v2` runs it and keeps the
// Markdown and JSON results in $QUOTA_BENCH_V2_OUT; `make test` skips it.
//
// The VM runs under software emulation (TCG) on this machine, so its times are the emulated
// CPU's, several times the native ones: compare them with the floor of the same run, not
// with the native tables. Counts (series, samples, bytes, RSS) are those of a real v2 node.
// There is no JDK compiler in the image, so the workload has no JVMs.
//
// QUOTA_BENCH_V2_PPROF=1 runs a profiling build (-tags pprof) and brings back its CPU profiles
// of the idle window and of the scrapes (go tool pprof bin/bench-node-v2/<file>.pprof).
func TestBenchNodeInVM(t *testing.T) {
	if os.Getenv("QUOTA_BENCH_V2") == "" {
		t.Skip("a benchmark: make bench-node-v2 runs it (QUOTA_BENCH_V2=1)")
	}
	n := 1000
	if s := os.Getenv("QUOTA_BENCH_V2_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			t.Fatalf("QUOTA_BENCH_V2_N=%q", s)
		}
	}
	host := vm.Find(t)
	dir := t.TempDir()
	root := testenv.RepoRoot()
	bins := filepath.Join(dir, "bins")
	if err := os.MkdirAll(bins, 0o755); err != nil {
		t.Fatal(err)
	}
	profile := os.Getenv("QUOTA_BENCH_V2_PPROF") == "1"
	var tags []string
	if profile {
		tags = []string{"-tags", "pprof"}
	}
	testenv.BuildExporter(t, filepath.Join(bins, "quota_exporter"), tags...)
	testenv.BuildGo(t, filepath.Join(root, "test"), "./benchnode/cmd/benchnode", filepath.Join(bins, "benchnode"))
	im, err := imageWith(host, dir, bins, "quota_exporter", "benchnode")
	if err != nil {
		t.Fatal(err)
	}
	pprofArgs, profiles := "", []string{}
	if profile {
		// The profiling build serves pprof on $QUOTA_PPROF_ADDR, inherited from benchnode.
		pprofArgs = "-pprof-addr 127.0.0.1:6061 -out-dir /tmp/prof"
		profiles = []string{"quota_exporter-idle.pprof", "quota_exporter-scrapes.pprof", "quota_exporter-allocs.pprof"}
	}
	scenario := fmt.Sprintf(`cd /tmp; mkdir -p /tmp/prof
echo "benchnode start, uptime $(cut -d' ' -f1 /proc/uptime)"
QUOTA_PPROF_ADDR=127.0.0.1:6061 /bin/benchnode -n %d -exporter /bin/quota_exporter -jvms 0 %s -json /tmp/bench.json > /tmp/bench.md 2> /tmp/bench.log
echo "benchnode rc=$?, uptime $(cut -d' ' -f1 /proc/uptime)" | tee -a /tmp/bench.log
section bench-md cat /tmp/bench.md
section bench-json cat /tmp/bench.json
section bench-log cat /tmp/bench.log
section leftovers sh -c 'ls -d /sys/fs/cgroup/quota_benchnode-* 2>/dev/null; true'
cd /tmp/prof && for f in *-idle.pprof *-scrapes.pprof *-allocs.pprof; do [ -f "$f" ] && mv "$f" "quota_exporter-${f##*-}"; done; cd /tmp
section profiles ls /tmp/prof`, n, pprofArgs)
	for _, p := range profiles {
		scenario += fmt.Sprintf("\nsection %s cat /tmp/prof/%s", p, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := host.Run(ctx, im, scenario)
	if res == nil {
		t.Fatal(err)
	}
	t.Logf("VM (%s): %v", res.Accel, time.Since(start).Round(time.Second))
	md, js, log := res.Section("bench-md"), res.Section("bench-json"), res.Section("bench-log")
	if out := os.Getenv("QUOTA_BENCH_V2_OUT"); out != "" {
		_ = os.MkdirAll(out, 0o755)
		files := map[string]string{"bench.md": md, "bench.json": js, "bench.log": log, "console.txt": res.Console}
		for _, p := range profiles {
			files[p] = res.Section(p)
		}
		for name, body := range files {
			if werr := os.WriteFile(filepath.Join(out, name), []byte(body), 0o644); werr != nil {
				t.Error(werr)
			}
		}
		t.Logf("results in %s", out)
	}
	t.Logf("benchnode log:\n%s", log)
	t.Logf("results (times under %s emulation):\n%s", res.Accel, md)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, "benchnode rc=0") {
		t.Fatalf("benchnode failed in the VM")
	}
	if left := strings.TrimSpace(res.Section("leftovers")); left != "" {
		t.Errorf("cgroups left behind: %s", left)
	}
}
