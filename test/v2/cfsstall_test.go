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

// stallCountTolerance: a stall in flight when tracing starts or stops is counted by one side only.
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
	nr, usec                    [2]int64 // cpu.stat nr_throttled, throttled_usec: right after attaching, right before detaching
	stalls                      []time.Duration
	median, p10, p90, mean, max time.Duration
	sum                         time.Duration
	periods                     int64 // sum over stalls of the period boundaries each spans
}

const cfsPeriod = 100 * time.Millisecond

func parseTrace(t *testing.T, text string) (map[string]*traced, string) {
	t.Helper()
	byDir, byID := map[string]*traced{}, map[string]*traced{}
	var mode string
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "mode":
			mode = f[1]
		case len(f) == 7 && f[0] == "cgroup" && f[4] == "before":
			tr := &traced{id: f[3], nr: [2]int64{num(f[5])}, usec: [2]int64{num(f[6])}}
			byDir[f[1]], byID[f[3]] = tr, tr
		case len(f) == 5 && f[0] == "cgroup" && f[2] == "after":
			if tr := byDir[f[1]]; tr != nil {
				tr.nr[1], tr.usec[1] = num(f[3]), num(f[4])
			}
		case len(f) == 3 && f[0] == "stall":
			if tr := byID[f[1]]; tr != nil {
				tr.stalls = append(tr.stalls, time.Duration(num(f[2])))
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
		for _, d := range s {
			tr.sum += d
			// A stall ends at a period boundary (the refill); it spans one boundary per started
			// period, and cpu.stat's nr_throttled counts each boundary that found it throttled.
			tr.periods += int64((d + cfsPeriod - 1) / cfsPeriod)
		}
		tr.median, tr.p10, tr.p90 = s[len(s)/2], s[len(s)/10], s[len(s)*9/10]
		tr.mean, tr.max = tr.sum/time.Duration(len(s)), s[len(s)-1]
	}
	return byDir, mode
}

func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// TestCFSStallLengths checks the program against the kernel's own counters of the same
// window, which hold however fast the emulated CPUs run:
//   - the stalls' total equals the increase of throttled_usec (the kernel adds each run
//     queue's throttled interval at unthrottle, as the program ends a stall; one burner
//     means one run queue throttled at a time), within 10% plus one period for the edges;
//   - the period boundaries the stalls span equal the increase of nr_throttled (the period
//     timer adds one per boundary that finds the cgroup throttled) within 2 + 5%; when no
//     stall spans more than one period that is the count of stalls itself;
//
// and against the quota: the median stall within 20% of period - quota. Emulation on a
// loaded host stretches the guest's periods (the period timer fires late), and then the
// kernel's own mean (throttled_usec / nr_throttled) is off too; the test compares with
// period - quota only when the kernel's own mean is within 20% of it, and says so otherwise.
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
		dnr, dusec := tr.nr[1]-tr.nr[0], tr.usec[1]-tr.usec[0]
		kernelMean := time.Duration(0)
		if dnr > 0 {
			kernelMean = time.Duration(dusec/dnr) * time.Microsecond
		}
		t.Logf("%s (cpu.max %s): %d stalls spanning %d periods, nr_throttled +%d; total %v, throttled_usec +%v; "+
			"median %v (want %v), p10 %v, p90 %v, mean %v (kernel's throttled_usec/nr_throttled %v), max %v",
			c.cgroup, c.max, len(tr.stalls), tr.periods, dnr, tr.sum.Round(time.Millisecond), time.Duration(dusec)*time.Microsecond,
			tr.median.Round(10*time.Microsecond), c.want, tr.p10.Round(10*time.Microsecond), tr.p90.Round(10*time.Microsecond),
			tr.mean.Round(10*time.Microsecond), kernelMean.Round(10*time.Microsecond), tr.max.Round(10*time.Microsecond))
		if len(tr.stalls) < 10 {
			t.Errorf("%s: only %d stalls in 6 s", c.cgroup, len(tr.stalls))
			continue
		}
		kernelTotal := time.Duration(dusec) * time.Microsecond
		if d := tr.sum - kernelTotal; math.Abs(float64(d)) > 0.1*float64(kernelTotal)+float64(cfsPeriod) {
			t.Errorf("%s: stalls total %v, throttled_usec rose by %v", c.cgroup, tr.sum, kernelTotal)
		}
		if d := tr.periods - dnr; math.Abs(float64(d)) > 2+0.05*float64(dnr) {
			t.Errorf("%s: stalls span %d periods, nr_throttled rose by %d (tolerance 2 + 5%%)", c.cgroup, tr.periods, dnr)
		}
		if tr.max <= cfsPeriod {
			if d := int64(len(tr.stalls)) - dnr; d < -stallCountTolerance || d > stallCountTolerance {
				t.Errorf("%s: %d stalls, nr_throttled rose by %d (tolerance %d)", c.cgroup, len(tr.stalls), dnr, stallCountTolerance)
			}
		}
		faithful := within(float64(kernelMean), float64(c.want), 0.2)
		if faithful {
			if !within(float64(tr.median), float64(c.want), 0.2) {
				t.Errorf("%s: median stall %v, want %v within 20%%", c.cgroup, tr.median, c.want)
			}
		} else {
			t.Logf("%s: the VM's own counters give %v per throttled period instead of %v: emulation too slow on this host "+
				"for the comparison with period - quota (load average %s)", c.cgroup, kernelMean, c.want, loadAverage())
		}
		// The exporter's histogram for the same cgroup, under its identity labels (it ran
		// longer than the trace, so only its mean is compared, with the trace's).
		count, sum, ok := sc.histogram("quota_cpu_throttle_stall_seconds", c.cgroup)
		if !ok || count < uint64(len(tr.stalls)) {
			t.Errorf("%s: quota_cpu_throttle_stall_seconds count %d (want at least the trace's %d):\n%s\nlog:\n%s",
				c.cgroup, count, len(tr.stalls), res.Section("stall-scrape"), res.Section("stall-exporter-log"))
			continue
		}
		mean := time.Duration(sum / float64(count) * 1e9)
		t.Logf("%s: exporter's histogram: %d stalls, mean %v", c.cgroup, count, mean.Round(10*time.Microsecond))
		if faithful && !within(float64(mean), float64(c.want), 0.2) {
			t.Errorf("%s: exporter's mean stall %v, want %v within 20%%", c.cgroup, mean, c.want)
		}
	}
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:min(3, len(strings.Fields(string(b))))], " ")
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
