package v2

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/v2/vm"
)

// The CFS stall program (exporter/internal/cfsstall) on a kernel that lets it attach. Two
// cgroups with one CPU burner each: cpu.max 20000 100000 leaves the burner frozen for the
// rest of every period, about 80 ms; 50000 100000 about 50 ms. stalltrace prints every stall
// with the cgroups' nr_throttled read right after attaching and right before detaching; the
// exporter runs with --collector.cfsstall meanwhile and is scraped at the end.
var stallCases = []struct {
	cgroup string
	max    string
	want   time.Duration
}{
	{"stall.slice/q20.scope", "20000 100000", 80 * time.Millisecond},
	{"stall.slice/q50.scope", "50000 100000", 50 * time.Millisecond},
}

// stallTolerance: a stall in flight when tracing starts or stops is counted by one side only.
const stallCountTolerance = 2

func stallScenario() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	var dirs []string
	for _, c := range stallCases {
		w("mkcg %s", c.cgroup)
		w("echo %q > $CG/%s/cpu.max", c.max, c.cgroup)
		w("runin %s sh -c 'while :; do :; done'", c.cgroup)
		dirs = append(dirs, "$CG/"+c.cgroup)
	}
	w("/bin/quota_exporter --web.listen-address=127.0.0.1:10138 --collector.cfsstall --no-collector.process --no-collector.jvm " +
		"--no-collector.go --no-collector.malloc --no-collector.smaps --web.disable-exporter-metrics > /tmp/exporter.log 2>&1 &")
	w(`j=0; while [ $j -lt 120 ] && ! wget -q -O /dev/null http://127.0.0.1:10138/metrics; do j=$((j+1)); sleep 0.5; done`)
	w("section trace /bin/stalltrace -duration 6s %s", strings.Join(dirs, " "))
	w("section stall-scrape sh -c 'wget -q -O - http://127.0.0.1:10138/metrics | grep -E \"stall|cfsstall\" | grep -v \"^# HELP\"'")
	w("section stall-exporter-log cat /tmp/exporter.log")
	return b.String()
}

func bootStallScenario(t *testing.T, host *vm.Host) *vm.Result {
	t.Helper()
	dir := t.TempDir()
	root := repoRoot()
	bins := filepath.Join(dir, "bins")
	for name, pkg := range map[string]string{"quota_exporter": "./exporter/cmd/quota_exporter", "stalltrace": "./exporter/internal/cfsstall/cmd/stalltrace"} {
		if err := run(root, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", filepath.Join(bins, name), pkg); err != nil {
			t.Fatal(err)
		}
	}
	im, err := vm.NewImage(host, filepath.Join(dir, "image"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"quota_exporter", "stalltrace"} {
		if err := im.AddBinary("/bin/"+b, filepath.Join(bins, b)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := host.Run(ctx, im, stallScenario())
	if res != nil && os.Getenv("QUOTA_V2_CONSOLE") != "" {
		_ = os.WriteFile(os.Getenv("QUOTA_V2_CONSOLE")+".cfsstall", []byte(res.Console), 0o644)
	}
	if err != nil {
		console := ""
		if res != nil {
			console = res.Console
		}
		t.Fatalf("VM: %v\n%s", err, console)
	}
	t.Logf("VM: accel %s, %v from qemu start to power-off", res.Accel, res.Elapsed.Round(100*time.Millisecond))
	return res
}

type traced struct {
	id                          string
	before, after               int
	stalls                      []time.Duration
	median, p10, p90, mean, max time.Duration
}

func parseTrace(t *testing.T, text string) (map[string]*traced, string) {
	t.Helper()
	byDir, byID := map[string]*traced{}, map[string]*traced{}
	var mode string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "mode":
			mode = f[1]
		case len(f) == 6 && f[0] == "cgroup" && f[4] == "throttled_before":
			n, _ := strconv.Atoi(f[5])
			tr := &traced{id: f[3], before: n}
			byDir[f[1]], byID[f[3]] = tr, tr
		case len(f) == 4 && f[0] == "cgroup" && f[2] == "throttled_after":
			if tr := byDir[f[1]]; tr != nil {
				tr.after, _ = strconv.Atoi(f[3])
			}
		case len(f) == 3 && f[0] == "stall":
			ns, _ := strconv.ParseInt(f[2], 10, 64)
			if tr := byID[f[1]]; tr != nil {
				tr.stalls = append(tr.stalls, time.Duration(ns))
			}
		case len(f) > 0 && f[0] == "error":
			t.Fatalf("stalltrace: %s", line)
		}
	}
	for _, tr := range byDir {
		s := append([]time.Duration(nil), tr.stalls...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		if len(s) == 0 {
			continue
		}
		var sum time.Duration
		for _, d := range s {
			sum += d
		}
		tr.median, tr.p10, tr.p90 = s[len(s)/2], s[len(s)/10], s[len(s)*9/10]
		tr.mean, tr.max = sum/time.Duration(len(s)), s[len(s)-1]
	}
	return byDir, mode
}

func TestCFSStallLengths(t *testing.T) {
	host := vm.Find(t)
	res := bootStallScenario(t, host)
	byDir, mode := parseTrace(t, res.Section("trace"))
	t.Logf("attached with %s", mode)
	sc := parseScrape(t, res.Section("stall-scrape"))
	for _, c := range stallCases {
		tr := byDir["/sys/fs/cgroup/"+c.cgroup]
		if tr == nil {
			t.Fatalf("%s: not in the trace:\n%s", c.cgroup, res.Section("trace"))
		}
		delta := tr.after - tr.before
		t.Logf("%s (cpu.max %s): %d stalls, nr_throttled +%d; median %v (want %v), p10 %v, p90 %v, mean %v, max %v",
			c.cgroup, c.max, len(tr.stalls), delta, tr.median, c.want, tr.p10, tr.p90, tr.mean, tr.max)
		if len(tr.stalls) < 10 {
			t.Errorf("%s: only %d stalls in 6 s", c.cgroup, len(tr.stalls))
			continue
		}
		if d := math.Abs(float64(tr.median-c.want)) / float64(c.want); d > 0.2 {
			t.Errorf("%s: median stall %v, want %v within 20%%", c.cgroup, tr.median, c.want)
		}
		if n := len(tr.stalls) - delta; n < -stallCountTolerance || n > stallCountTolerance {
			t.Errorf("%s: %d stalls but nr_throttled rose by %d (tolerance %d)", c.cgroup, len(tr.stalls), delta, stallCountTolerance)
		}
		// The exporter's histogram for the same cgroup, under its identity labels.
		count, sum, ok := sc.histogram("quota_cpu_throttle_stall_seconds", c.cgroup)
		if !ok || count == 0 {
			t.Errorf("%s: no quota_cpu_throttle_stall_seconds in the scrape:\n%s\nlog:\n%s", c.cgroup, res.Section("stall-scrape"), res.Section("stall-exporter-log"))
			continue
		}
		mean := time.Duration(sum / float64(count) * 1e9)
		t.Logf("%s: exporter histogram count %d, mean %v", c.cgroup, count, mean)
		if d := math.Abs(float64(mean-c.want)) / float64(c.want); d > 0.2 {
			t.Errorf("%s: exporter's mean stall %v, want %v within 20%%", c.cgroup, mean, c.want)
		}
	}
}

// histogram returns the sample count and sum of a histogram series of cgroup.
func (s scrape) histogram(name, cgroup string) (uint64, float64, bool) {
	for _, m := range s[name].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "cgroup" && l.GetValue() == "/"+cgroup && m.Histogram != nil {
				return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum(), true
			}
		}
	}
	return 0, 0, false
}
