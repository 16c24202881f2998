package benchnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quota-exporter/quota_exporter/test/internal/runner"
)

// TargetOptions say how to run and measure one exporter binary.
type TargetOptions struct {
	Name string
	Bin  string
	// Args are extra flags; the listen address is added by the benchmark.
	Args []string
	// ListenFlag is the exporter's listen-address flag (both exporters use --web.listen-address).
	ListenFlag  string
	MetricsPath string
	Idle        time.Duration // window with nobody scraping
	Settle      time.Duration // wait after the warm-up scrape before the idle window
	Scrapes     int           // per encoding
	ScrapeGap   time.Duration
	// ContainerPrefix selects the benchmark's container cgroups in the cgroup label.
	ContainerPrefix string
	// PprofAddr, when set, is the target's net/http/pprof address (a profiling build):
	// CPU profiles of the idle window and of ProfileScrapes, and an allocation profile, are
	// saved into ProfileDir, which also gets the last plain response (when set).
	PprofAddr      string
	ProfileDir     string
	ProfileScrapes time.Duration
	Logf           func(format string, args ...any)
}

// Stats are p50/p99 of a sample (nearest rank; with 10 samples p99 is the maximum).
type Stats struct{ P50, P99, Mean float64 }

func stats(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	rank := func(p float64) float64 {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Stats{P50: rank(0.5), P99: rank(0.99), Mean: sum / float64(len(s))}
}

// ScrapeResult is one encoding's scrapes.
type ScrapeResult struct {
	WallMS, CPUMS Stats
	Bytes         int // response body as sent (compressed for gzip)
	N             int
}

// TargetResult is everything measured of one exporter.
type TargetResult struct {
	Name           string
	IdleSeconds    float64
	IdleCPUPercent float64 // of one core, utime+stime from /proc/<pid>/stat
	// IdleSchedPercent is the same from the threads' schedstat (ns; threads that ended
	// during the window are missing).
	IdleSchedPercent float64
	Plain, Gzip      ScrapeResult
	RSSMiB, HWMMiB   float64 // after the scrapes
	StartupCPUMS     float64 // CPU until ready, the warm-up scrape included
	Exposition       *Exposition
	Errors           []string
	// BetweenRSSMiB is VmRSS just before each scrape but the first, a gap after the one
	// before: what the exporter holds between scrapes. The one figure after the last scrape
	// moves by a few MiB with where the GC and the scavenger happen to be.
	BetweenRSSMiB Stats
}

// RunTarget starts the binary, measures it and stops it.
func RunTarget(ctx context.Context, o TargetOptions) (*TargetResult, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.MetricsPath == "" {
		o.MetricsPath = "/metrics"
	}
	if o.ListenFlag == "" {
		o.ListenFlag = "--web.listen-address"
	}
	port, err := runner.FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := append([]string{o.ListenFlag + "=" + addr}, o.Args...)
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("benchnode-%s-%d.log", o.Name, os.Getpid()))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(o.Bin, args...)
	if o.PprofAddr != "" { // a profiling build serves pprof only where this says
		cmd.Env = append(os.Environ(), "QUOTA_PPROF_ADDR="+o.PprofAddr)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.Bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer stopProcess(cmd, exited)
	pid := cmd.Process.Pid
	o.Logf("%s: started pid %d on %s (log %s)", o.Name, pid, addr, logPath)

	client := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 2 * time.Minute}
	base := "http://" + addr
	if err := waitReady(ctx, client, base+"/", exited); err != nil {
		return nil, fmt.Errorf("%s: %w (log %s)", o.Name, err, logPath)
	}
	r := &TargetResult{Name: o.Name}
	// A warm-up scrape: the idle window is measured in the state a scraped exporter lives in
	// (caches filled, background loops running).
	if _, _, err := scrape(ctx, client, base+o.MetricsPath, false); err != nil {
		return nil, fmt.Errorf("%s: warm-up scrape: %w", o.Name, err)
	}
	ticks, _ := cpuTicks(pid)
	r.StartupCPUMS = float64(ticks) * 10
	if err := sleep(ctx, o.Settle); err != nil {
		return nil, err
	}

	idleProfile := startProfile(ctx, o, "idle", o.Idle)
	t0, err := cpuTicks(pid)
	if err != nil {
		return nil, err
	}
	s0 := cpuNS(pid)
	begin := time.Now()
	if err := sleep(ctx, o.Idle); err != nil {
		return nil, err
	}
	t1, err := cpuTicks(pid)
	if err != nil {
		return nil, err
	}
	r.IdleSeconds = time.Since(begin).Seconds()
	r.IdleSchedPercent = float64(cpuNS(pid)-s0) / 1e9 / r.IdleSeconds * 100
	r.IdleCPUPercent = float64(t1-t0) / clkTck / r.IdleSeconds * 100
	if err := idleProfile(); err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	o.Logf("%s: idle %.2f%% of a core over %.0fs (schedstat %.2f%%)", o.Name, r.IdleCPUPercent, r.IdleSeconds, r.IdleSchedPercent)

	var plainBody []byte
	var between []float64
	for _, gz := range []bool{false, true} {
		var walls, cpus []float64
		res := ScrapeResult{}
		for i := range o.Scrapes {
			if err := sleep(ctx, o.ScrapeGap); err != nil {
				return nil, err
			}
			if gz || i > 0 { // before the first, the idle window: no gap between scrapes
				rss, _ := memory(pid)
				between = append(between, rss)
			}
			c0 := cpuNS(pid)
			w0 := time.Now()
			body, _, err := scrape(ctx, client, base+o.MetricsPath, gz)
			wall := time.Since(w0)
			c1 := cpuNS(pid)
			if err != nil {
				return nil, fmt.Errorf("%s: scrape %d: %w", o.Name, i, err)
			}
			walls = append(walls, float64(wall)/1e6)
			cpus = append(cpus, float64(c1-c0)/1e6)
			res.Bytes = len(body)
			if !gz {
				plainBody = body
			}
		}
		res.WallMS, res.CPUMS, res.N = stats(walls), stats(cpus), len(walls)
		if gz {
			r.Gzip = res
		} else {
			r.Plain = res
		}
		o.Logf("%s: gzip=%v wall p50 %.0f p99 %.0f ms, CPU p50 %.0f p99 %.0f ms, %d bytes", o.Name, gz,
			res.WallMS.P50, res.WallMS.P99, res.CPUMS.P50, res.CPUMS.P99, res.Bytes)
	}
	if o.PprofAddr != "" {
		stop := startProfile(ctx, o, "scrapes", o.ProfileScrapes)
		deadline := time.Now().Add(o.ProfileScrapes)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if _, _, err := scrape(ctx, client, base+o.MetricsPath, false); err != nil {
				break
			}
		}
		if err := stop(); err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
		if err := saveURL(ctx, "http://"+o.PprofAddr+"/debug/pprof/allocs", filepath.Join(o.ProfileDir, o.Name+"-allocs.pprof")); err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
	}
	r.RSSMiB, r.HWMMiB = memory(pid)
	r.BetweenRSSMiB = stats(between)
	if o.ProfileDir != "" {
		if err := os.WriteFile(filepath.Join(o.ProfileDir, o.Name+".prom"), plainBody, 0o644); err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
	}
	r.Exposition = ParseExposition(plainBody, o.ContainerPrefix)
	return r, nil
}

// startProfile fetches a CPU profile of d in the background (when the target serves pprof);
// the returned function waits for it.
func startProfile(ctx context.Context, o TargetOptions, name string, d time.Duration) func() error {
	if o.PprofAddr == "" {
		return func() error { return nil }
	}
	errc := make(chan error, 1)
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", o.PprofAddr, int(d.Seconds()))
	go func() { errc <- saveURL(ctx, url, filepath.Join(o.ProfileDir, o.Name+"-"+name+".pprof")) }()
	time.Sleep(100 * time.Millisecond) // let the profile start before the window
	return func() error { return <-errc }
}

func saveURL(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("pprof: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func scrape(ctx context.Context, c *http.Client, url string, gz bool) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return body, resp.Header.Get("Content-Encoding"), nil
}

func waitReady(ctx context.Context, c *http.Client, url string, exited <-chan error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("exited before it served: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("not serving after 30s")
		}
	}
}

func stopProcess(cmd *exec.Cmd, exited <-chan error) {
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited: //nolint:errcheck // the exit status of a process this stops
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited //nolint:errcheck // likewise
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// clkTck is USER_HZ, the unit of utime and stime (100 on Linux).
const clkTck = 100

// cpuTicks is utime+stime of the whole process (all threads, dead ones included).
func cpuTicks(pid int) (uint64, error) {
	f, err := StatFields(pid)
	if err != nil {
		return 0, err
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return u + s, nil
}

// StatFields are the fields of /proc/<pid>/stat after the command name: f[0] is the state
// (field 3), f[11] utime, f[19] the start time in ticks since boot (field 22).
func StatFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("bad stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, errors.New("short stat")
	}
	return f, nil
}

// cpuNS is the CPU time of the process's live threads in nanoseconds (schedstat): the
// per-scrape figure, where 10 ms ticks would be too coarse. Go seldom ends threads.
func cpuNS(pid int) uint64 {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var sum uint64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseUint(f[0], 10, 64)
			sum += n
		}
	}
	return sum
}

// memory is VmRSS and VmHWM (peak RSS) in MiB.
func memory(pid int) (rss, hwm float64) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch k {
		case "VmRSS":
			rss = kb / 1024
		case "VmHWM":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

// Exposition summarises a plain-text scrape.
type Exposition struct {
	Samples int
	// Containers is the number of benchmark container cgroups seen in the cgroup label.
	Containers int
	// SeriesPerContainer is the mean number of samples carrying a container's cgroup label;
	// SeriesPerContainerMedian the typical container's (the few with a JVM or Go program
	// carry their processes' series too).
	SeriesPerContainer       float64
	SeriesPerContainerMedian int
	// PerMetric is samples per container cgroup by metric family (histogram lines counted
	// under the family name), for the cgroups that have the family.
	PerMetric map[string]float64
	// EmptyLabels counts label pairs with an empty value; EmptyLabelBytes is what they take.
	EmptyLabels, EmptyLabelBytes int
	Bytes                        int
}

var emptyLabel = regexp.MustCompile(`[{,][a-zA-Z_][a-zA-Z0-9_]*=""`)

// ParseExposition counts samples line by line: the text format has one sample per line,
// which is the series count a Prometheus server would store (a parser into client_model
// would fold histogram lines into one metric and hide that).
func ParseExposition(body []byte, containerPrefix string) *Exposition {
	e := &Exposition{PerMetric: map[string]float64{}, Bytes: len(body)}
	perCgroup := map[string]int{}
	perMetric := map[string]int{}
	metricCgroups := map[string]map[string]bool{}
	for _, line := range bytes.Split(body, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		e.Samples++
		for _, m := range emptyLabel.FindAll(line, -1) {
			e.EmptyLabels++
			e.EmptyLabelBytes += len(m) // the label and one separator
		}
		name := line
		if i := bytes.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		cg := labelValue(line, "cgroup")
		if containerPrefix == "" || !strings.HasPrefix(cg, containerPrefix) {
			continue
		}
		perCgroup[cg]++
		n := string(name)
		perMetric[n]++
		if metricCgroups[n] == nil {
			metricCgroups[n] = map[string]bool{}
		}
		metricCgroups[n][cg] = true
	}
	e.Containers = len(perCgroup)
	total := 0
	var counts []int
	for _, n := range perCgroup {
		total += n
		counts = append(counts, n)
	}
	if len(counts) > 0 {
		sort.Ints(counts)
		e.SeriesPerContainerMedian = counts[len(counts)/2]
	}
	if e.Containers > 0 {
		e.SeriesPerContainer = float64(total) / float64(e.Containers)
	}
	// Histogram lines count under the family: _bucket, and _sum/_count of a name with buckets.
	hist := map[string]bool{}
	for n := range perMetric {
		if b, ok := strings.CutSuffix(n, "_bucket"); ok {
			hist[b] = true
		}
	}
	famCgroups := map[string]map[string]bool{}
	for n, cgs := range metricCgroups {
		fam := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suf); ok && hist[b] {
				fam = b
			}
		}
		e.PerMetric[fam] += float64(perMetric[n])
		if famCgroups[fam] == nil {
			famCgroups[fam] = map[string]bool{}
		}
		for cg := range cgs {
			famCgroups[fam][cg] = true
		}
	}
	for fam := range e.PerMetric {
		e.PerMetric[fam] /= float64(len(famCgroups[fam]))
	}
	return e
}

// labelValue finds label="value" in a sample line (no unescaping: the benchmark's cgroup
// names need none).
func labelValue(line []byte, label string) string {
	for _, sep := range []string{"{", ","} {
		key := []byte(sep + label + `="`)
		if i := bytes.Index(line, key); i >= 0 {
			rest := line[i+len(key):]
			if j := bytes.IndexByte(rest, '"'); j >= 0 {
				return string(rest[:j])
			}
		}
	}
	return ""
}
