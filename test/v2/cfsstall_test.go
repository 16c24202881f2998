package v2

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
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

// stallModes: the program is traced once attached each way (the VM kernel allows both; the
// exporter picks fentry).
var stallModes = []string{"fentry", "kprobe"}

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
	for _, mode := range stallModes {
		w("section trace-%s /bin/stalltrace -mode %s -stats -duration 6s -scrape http://127.0.0.1:10138/metrics %s", mode, mode, strings.Join(dirs, " "))
	}
	w("section stall-exporter-log cat /tmp/exporter.log")
	return b.String()
}

func bootStallScenario(t *testing.T, host *vm.Host) *vm.Result {
	t.Helper()
	dir := t.TempDir()
	root := testenv.RepoRoot()
	bins := filepath.Join(dir, "bins")
	for name, pkg := range map[string]string{"quota_exporter": "./exporter/cmd/quota_exporter", "stalltrace": "./exporter/internal/cfsstall/cmd/stalltrace"} {
		testenv.BuildGo(t, root, pkg, filepath.Join(bins, name))
	}
	im, err := imageWith(host, dir, bins, "quota_exporter", "stalltrace")
	if err != nil {
		t.Fatal(err)
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

// stall is one line of the trace: its length and when it ended (CLOCK_MONOTONIC ns).
type stall struct {
	d   time.Duration
	end int64
	rqs int64 // the most run queues throttled at once in it
}

type traced struct {
	id       string
	nr, usec [2]int64 // cpu.stat nr_throttled, throttled_usec: right after attaching, right before detaching
	stalls   []stall
	// The exporter's histogram _count and _sum scraped at both ends.
	expCount, expSum [2]float64
}

// trace is stalltrace's output.
type trace struct {
	mode    string
	byDir   map[string]*traced
	windows map[string][2]int64 // name -> when the reads began and ended
	lines   []string
}

const cfsPeriod = 100 * time.Millisecond

var cgroupLabel = regexp.MustCompile(`[{,]cgroup="([^"]*)"`)

func parseTrace(t *testing.T, text string) *trace {
	t.Helper()
	tr := &trace{byDir: map[string]*traced{}, windows: map[string][2]int64{}}
	byID := map[string]*traced{}
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "mode":
			tr.mode = f[1]
		case len(f) == 7 && f[0] == "cgroup" && f[4] == "before":
			c := &traced{id: f[3], nr: [2]int64{num(f[5])}, usec: [2]int64{num(f[6])}}
			tr.byDir[f[1]], byID[f[3]] = c, c
		case len(f) == 5 && f[0] == "cgroup" && f[2] == "after":
			if c := tr.byDir[f[1]]; c != nil {
				c.nr[1], c.usec[1] = num(f[3]), num(f[4])
			}
		case len(f) == 4 && f[0] == "window":
			tr.windows[f[1]] = [2]int64{num(f[2]), num(f[3])}
		case len(f) == 5 && f[0] == "stall":
			if c := byID[f[1]]; c != nil {
				c.stalls = append(c.stalls, stall{time.Duration(num(f[2])), num(f[3]), num(f[4])})
			}
		case len(f) == 4 && f[0] == "exporter":
			m := cgroupLabel.FindStringSubmatch(f[2])
			if m == nil || tr.byDir["/sys/fs/cgroup"+m[1]] == nil {
				continue
			}
			c, i := tr.byDir["/sys/fs/cgroup"+m[1]], 0
			if f[1] == "after" {
				i = 1
			}
			v, _ := strconv.ParseFloat(f[3], 64)
			if strings.HasPrefix(f[2], "quota_cpu_throttle_stall_seconds_count") {
				c.expCount[i] = v
			} else {
				c.expSum[i] = v
			}
		case len(f) > 0 && f[0] == "error":
			t.Fatalf("stalltrace: %s", line)
		default:
			tr.lines = append(tr.lines, line)
		}
	}
	return tr
}

// tally sums the stalls that ended between two moments: their number, total length, and the
// period boundaries they span (a stall ends at a boundary, the refill, and spans one per
// started period: cpu.stat's nr_throttled counts each boundary that finds the cgroup throttled).
type tally struct {
	n, periods int64
	total      time.Duration
	overlapped int64 // stalls with several run queues throttled at once
}

func (c *traced) between(from, to int64) tally {
	var t tally
	for _, s := range c.stalls {
		if s.end >= from && s.end <= to {
			t.n++
			t.total += s.d
			t.periods += int64((s.d + cfsPeriod - 1) / cfsPeriod)
			if s.rqs > 1 {
				t.overlapped++
			}
		}
	}
	return t
}

func quantile(s []stall, q float64) time.Duration {
	d := make([]time.Duration, len(s))
	for i := range s {
		d[i] = s[i].d
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(q*float64(len(d)-1))]
}

func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// TestCFSStallLengths checks the program against the kernel's own counters over the same
// window (stalls are matched to a window by their end time; a stall that ended while a
// counter was being read may fall on either side, so each comparison has a lower bound,
// the stalls that ended strictly inside, and an upper bound, those that ended from the start
// of the first read to the end of the last), which hold however fast the emulated CPUs run:
//   - the stalls' total equals the increase of throttled_usec (the kernel adds each run
//     queue's throttled interval at unthrottle, as the program ends a stall; one burner
//     means one run queue throttled at a time), from 1% above to 10% below; where the
//     program saw several run queues throttled at once (a guest that fell behind),
//     throttled_usec sums them and only the first bound holds;
//   - the period boundaries the stalls span equal the increase of nr_throttled (the period
//     timer adds one per boundary that finds the cgroup throttled), within 2 + 5%: the span
//     is estimated as ceil(length / period), which a late period timer (emulation) or a
//     release by the slack timer between boundaries can put off by one; when no stall spans
//     more than one period the number of stalls itself is compared, within 2;
//   - the exporter's histogram, scraped at both ends, counts the same stalls.
//
// And against the quota: the median stall within 20% of period - quota. Emulation on a
// loaded host (load average 95 seen) stretches the guest's periods: the period timer fires
// late and stalls merge across periods. The test compares with period - quota only when the
// guest kept up (the kernel's own throttled_usec / nr_throttled within 20% of it, and at
// most 10% of the stalls longer than a period), saying so otherwise.
func TestCFSStallLengths(t *testing.T) {
	host := vm.Find(t)
	res := bootStallScenario(t, host)
	for _, mode := range stallModes {
		t.Run(mode, func(t *testing.T) { checkStallTrace(t, res, mode) })
	}
}

func checkStallTrace(t *testing.T, res *vm.Result, mode string) {
	text := res.Section("trace-" + mode)
	tr := parseTrace(t, text)
	if tr.mode != mode {
		t.Fatalf("attached with %q, want %s:\n%s", tr.mode, mode, text)
	}
	for _, line := range tr.lines {
		if strings.HasPrefix(line, "runs ") || strings.HasPrefix(line, "lost ") {
			t.Logf("program cost (TCG, kernel's BPF statistics): %s", line)
		}
	}
	cb, ca, sb, sa := tr.windows["cpustat-before"], tr.windows["cpustat-after"], tr.windows["scrape-before"], tr.windows["scrape-after"]
	if cb[1] == 0 || ca[1] == 0 || sb[1] == 0 || sa[1] == 0 {
		t.Fatalf("trace without its windows:\n%s", text)
	}
	for _, c := range stallCases {
		st := tr.byDir["/sys/fs/cgroup/"+c.cgroup]
		if st == nil || len(st.stalls) < 10 {
			t.Errorf("%s: fewer than 10 stalls in 6 s:\n%s", c.cgroup, text)
			continue
		}
		dnr, dusec := st.nr[1]-st.nr[0], time.Duration(st.usec[1]-st.usec[0])*time.Microsecond
		var kernelMean time.Duration
		if dnr > 0 {
			kernelMean = dusec / time.Duration(dnr)
		}
		lo, hi := st.between(cb[1], ca[0]), st.between(cb[0], ca[1])
		median, maxStall := quantile(st.stalls, 0.5), quantile(st.stalls, 1)
		t.Logf("%s (cpu.max %s): %d stalls (%d-%d in the counters' window) spanning %d-%d periods, nr_throttled +%d; "+
			"total %v-%v, throttled_usec +%v; median %v (want %v), p10 %v, p90 %v, max %v; kernel's throttled_usec/nr_throttled %v",
			c.cgroup, c.max, len(st.stalls), lo.n, hi.n, lo.periods, hi.periods, dnr, lo.total.Round(time.Millisecond),
			hi.total.Round(time.Millisecond), dusec, median.Round(10*time.Microsecond), c.want,
			quantile(st.stalls, 0.1).Round(10*time.Microsecond), quantile(st.stalls, 0.9).Round(10*time.Microsecond),
			maxStall.Round(10*time.Microsecond), kernelMean.Round(10*time.Microsecond))
		// The kernel sums the run queues' throttled time; a stall counts once however many
		// were throttled at once, so the totals are equal only without such overlaps.
		// The stalls' total never exceeds throttled_usec by more than 1% and falls short of it
		// by at most 10%: in 4 quiet fentry runs they agreed within 0.3%, in one 8.8% short with
		// every count equal, and kprobe runs were 2-3% short (see docs/performance.md; not
		// explained yet). The kernel's sum over run queues and its rq clock (not ktime) can
		// only make throttled_usec larger.
		if dusec < lo.total*99/100 || (hi.overlapped == 0 && dusec > hi.total*110/100) {
			t.Errorf("%s: throttled_usec rose by %v, the stalls in the window total %v-%v (%d with several run queues throttled at once)",
				c.cgroup, dusec, lo.total, hi.total, hi.overlapped)
		}
		if hi.overlapped > 0 {
			t.Logf("%s: %d stalls had several run queues throttled at once: throttled_usec (summed over them) may exceed the stalls' total",
				c.cgroup, hi.overlapped)
		}
		if slack := 2 + hi.periods/20; dnr < lo.periods-slack || dnr > hi.periods+slack {
			t.Errorf("%s: nr_throttled rose by %d, the stalls in the window span %d-%d periods (tolerance 2 + 5%%)", c.cgroup, dnr, lo.periods, hi.periods)
		}
		if maxStall <= cfsPeriod && (dnr < lo.n-2 || dnr > hi.n+2) {
			t.Errorf("%s: nr_throttled rose by %d, %d-%d stalls in the window", c.cgroup, dnr, lo.n, hi.n)
		}
		// One burner overruns its quota by at most a slice, so a stall longer than a period
		// means the guest fell behind (the period timer fired late, the vCPU did not run).
		var long int
		for _, s := range st.stalls {
			if s.d > cfsPeriod+5*time.Millisecond {
				long++
			}
		}
		if within(float64(kernelMean), float64(c.want), 0.2) && long*10 <= len(st.stalls) {
			if !within(float64(median), float64(c.want), 0.2) {
				t.Errorf("%s: median stall %v, want %v within 20%%", c.cgroup, median, c.want)
			}
		} else {
			t.Logf("%s: the VM fell behind (its own counters give %v per throttled period instead of %v; %d of %d stalls longer "+
				"than a period): emulation too slow on this host for the comparison with period - quota (load average %s)",
				c.cgroup, kernelMean, c.want, long, len(st.stalls), loadAverage())
		}
		// The exporter's histogram for the same cgroup, under its identity labels.
		elo, ehi := st.between(sb[1], sa[0]), st.between(sb[0], sa[1])
		dcount, dsum := st.expCount[1]-st.expCount[0], st.expSum[1]-st.expSum[0]
		t.Logf("%s: exporter's histogram: %v stalls, total %.3fs between its scrapes; the trace: %d-%d stalls, %v-%v",
			c.cgroup, dcount, dsum, elo.n, ehi.n, elo.total, ehi.total)
		// One stall either way at the window's edges: the scenario stamps its scrapes from a
		// shell under emulation, and twice a run's exporter counted 62 where the trace placed
		// 60-61 between them (the extra stall ended 50 ms after the scrape's stamp). The sum
		// then allows that stall's length too.
		extra := max(0, dcount-float64(ehi.n), float64(elo.n)-dcount)
		if st.expCount[1] == 0 || extra > 1 {
			t.Errorf("%s: the exporter counted %v stalls between its scrapes, the trace %d-%d:\n%s\nlog:\n%s",
				c.cgroup, dcount, elo.n, ehi.n, text, res.Section("stall-exporter-log"))
		} else if tol := 0.01*ehi.total.Seconds() + 0.5e-3*dcount + extra*maxStall.Seconds(); dsum < elo.total.Seconds()-tol || dsum > ehi.total.Seconds()+tol {
			// Two programs on the same hooks (the exporter's and the trace's) take their own
			// timestamps: under emulation each stall's two readings differ by up to ~0.2 ms.
			t.Errorf("%s: the exporter's stalls total %.6fs between its scrapes, the trace's %v-%v (±%.4fs)", c.cgroup, dsum, elo.total, ehi.total, tol)
		}
	}
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:min(3, len(strings.Fields(string(b))))], " ")
}
