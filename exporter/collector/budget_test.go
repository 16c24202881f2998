//go:build linux

package collector

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// hostileCgroups and hostileJavas are what the hostile tenant of TestTenantMultipliesBudgeted
// plants: empty delegated cgroups that carry only a quota (the 2 000 gave 22 078
// series), and tiny processes named java (28 series each).
const (
	hostileCgroups = 2000
	hostileJavas   = 300
)

// tenantSeries counts the per-cgroup and per-process series whose cgroup label is prefix or
// below it, and the cgroups they name; sampled is the cgroups with a throttling histogram.
func tenantSeries(mfs []*dto.MetricFamily, prefix string) (series int, cgroups, sampled map[string]bool, keys map[string]bool) {
	cgroups, sampled, keys = map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			cg, ok := labelValue(m, "cgroup")
			if !ok || (cg != prefix && !strings.HasPrefix(cg, prefix+"/")) {
				continue
			}
			series++
			cgroups[cg] = true
			if mf.GetName() == "quota_cpu_throttled_window_ratio" {
				sampled[cg] = true
			}
			keys[seriesKey(mf.GetName(), m)] = true
		}
	}
	return series, cgroups, sampled, keys
}

func labelValue(m *dto.Metric, name string) (string, bool) {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue(), true
		}
	}
	return "", false
}

// seriesKey is a series' name and labels, without the pid (it differs between runs of one
// program) and the value.
func seriesKey(name string, m *dto.Metric) string {
	var parts []string
	for _, lp := range m.GetLabel() {
		if lp.GetName() != "pid" {
			parts = append(parts, lp.GetName()+"="+lp.GetValue())
		}
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// defaultExporter builds a default exporter's collectors over cfg; the caller closes the set.
func defaultExporter(t *testing.T, cfg Config) (*Env, *Set) {
	t.Helper()
	env, err := NewEnv(cfg, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewSet(env, defaultCollectorNames())
	if err != nil {
		t.Fatal(err)
	}
	return env, set
}

// startIn starts argv in cg and stops it when the test ends.
func startIn(t *testing.T, cg *testutil.Cgroup, argv ...string) *exec.Cmd {
	t.Helper()
	c := cg.Command(argv[0], argv[1:]...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return c
}

// defaultCollectorNames are the collectors a default exporter runs.
func defaultCollectorNames() []string {
	var out []string
	for _, n := range Available() {
		if DefaultEnabled(n) {
			out = append(out, n)
		}
	}
	return out
}

// anchoredPaths matches the cgroups at or below any of paths.
func anchoredPaths(paths ...string) *regexp.Regexp {
	var q []string
	for _, p := range paths {
		q = append(q, regexp.QuoteMeta(p))
	}
	return regexp.MustCompile("^(?:" + strings.Join(q, "|") + ")(?:/.*)?$")
}

// gatherSampled gathers set once the throttling sampler has closed a few windows over
// every cgroup it samples (the calm tenant's histogram is among the series compared).
func gatherSampled(t *testing.T, set *Set, window time.Duration) []*dto.MetricFamily {
	t.Helper()
	if _, err := set.Gather(context.Background(), 20*time.Second); err != nil { // the first walk feeds the sampler
		t.Fatal(err)
	}
	time.Sleep(4 * window)
	mfs, err := set.Gather(context.Background(), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// A tenant that multiplies what the exporter exports (real v1 cgroups: 2 000 empty ones
// carrying only a quota, and 300 tiny processes named java) gets its budgets, and a calm
// tenant beside it keeps every one of its series: the same series as when it is alone on the
// node, its per-second throttling histogram and its JVM's series included.
func TestTenantMultipliesBudgeted(t *testing.T) {
	const window = 250 * time.Millisecond
	calm := testutil.NewTopCgroup(t, "calm", testutil.CgroupOptions{QuotaUS: 50000, MemoryLimit: 256 << 20})
	calmApp := calm.Child("app", testutil.CgroupOptions{QuotaUS: 50000})
	java := filepath.Join(t.TempDir(), "java")
	testutil.CopyFile(t, "/bin/sleep", java, 0o755)
	startIn(t, calmApp, "sleep", "600")
	startIn(t, calmApp, java, "600")
	cfg := Config{ProcPath: "/proc", SysPath: "/sys", ThrottleWindow: window, CgroupInclude: anchoredPaths(calm.Path)}
	calmAlone := scrapeTenants(t, cfg, window, calm.Path)[0]

	hostile := testutil.NewTopCgroup(t, "hostile", testutil.CgroupOptions{})
	begin := time.Now()
	for i := range hostileCgroups {
		hostile.Child(fmt.Sprintf("c%04d", i), testutil.CgroupOptions{QuotaUS: 50000})
	}
	for range hostileJavas {
		startIn(t, hostile, java, "600")
	}
	t.Logf("hostile tenant planted in %v: %d cgroups with a quota, %d processes named java", time.Since(begin), hostileCgroups, hostileJavas)
	waitUntil(t, func() bool { return len(hostile.PIDs()) == hostileJavas })

	cfg.CgroupInclude = anchoredPaths(calm.Path, hostile.Path)
	got := scrapeTenants(t, cfg, window, calm.Path, hostile.Path)
	calmBoth, hostileBoth := got[0], got[1]
	t.Logf("calm tenant alone: %d series over %d cgroups; beside the hostile one: %d over %d", calmAlone.series, len(calmAlone.cgroups), calmBoth.series, len(calmBoth.cgroups))
	t.Logf("hostile tenant: %d series over %d cgroups, %d sampled cgroups", hostileBoth.series, len(hostileBoth.cgroups), len(hostileBoth.sampled))

	// The calm tenant keeps every series it has alone (but the heap's resident size, which the
	// smaps refresher reads on a clock of its own).
	for k := range calmAlone.keys {
		if !calmBoth.keys[k] && !strings.HasPrefix(k, "quota_process_malloc_heap_resident_bytes{") {
			t.Errorf("the calm tenant lost %s beside the hostile one", k)
		}
	}
	jvmSeries := 0
	for k := range calmAlone.keys {
		if strings.HasPrefix(k, "quota_jvm_") {
			jvmSeries++
		}
	}
	if len(calmAlone.sampled) != 2 || jvmSeries == 0 {
		t.Errorf("the calm tenant alone: sampled %v, %d JVM series: want both cgroups sampled and its JVM's series", calmAlone.sampled, jvmSeries)
	}
	// The hostile tenant is held to its budgets (the defaults of docs/sizing.md).
	if hostileBoth.series > wantSeriesPerTenant {
		t.Errorf("hostile tenant: %d series, budget %d", hostileBoth.series, wantSeriesPerTenant)
	}
	if len(hostileBoth.cgroups) > wantCgroupsPerTenant {
		t.Errorf("hostile tenant: %d cgroups exported, budget %d", len(hostileBoth.cgroups), wantCgroupsPerTenant)
	}
	if len(hostileBoth.sampled) > wantSampledPerTenant {
		t.Errorf("hostile tenant: %d cgroups sampled every window, budget %d", len(hostileBoth.sampled), wantSampledPerTenant)
	}
	// What was left out is counted by budget and reason and named by tenant (the log and
	// diagnose read these); the calm tenant is over none.
	for _, b := range []string{budget.Cgroups, budget.Processes, budget.Series, budget.SampledCgroups} {
		sk, ok := hostileBoth.skips[b+"/"+budget.ReasonTenant]
		if !ok || sk.Skipped == 0 || sk.Name != hostile.Path {
			t.Errorf("budget %s: the hostile tenant's skip is %+v (found %v)", b, sk, ok)
		}
		if hostileBoth.counted[b+"/"+budget.ReasonTenant] < float64(sk.Skipped) {
			t.Errorf("quota_exporter_budget_skipped_total{budget=%q,reason=\"tenant\"} = %v, want at least %d", b, hostileBoth.counted[b+"/tenant"], sk.Skipped)
		}
	}
	if sk := hostileBoth.skips[budget.Cgroups+"/"+budget.ReasonTenant]; sk.Kept != wantCgroupsPerTenant || sk.Skipped != hostileCgroups+1-wantCgroupsPerTenant {
		t.Errorf("cgroups budget: kept %d, skipped %d of the hostile tenant's %d", sk.Kept, sk.Skipped, hostileCgroups+1)
	}
	if sk := hostileBoth.skips[budget.Processes+"/"+budget.ReasonTenant]; sk.Skipped != hostileJavas-budget.Defaults().Processes.PerTenant {
		t.Errorf("processes budget: skipped %d of %d", sk.Skipped, hostileJavas)
	}
	if len(calmBoth.skips) != 0 {
		t.Errorf("the calm tenant is over budgets: %v", calmBoth.skips)
	}
}

// Default budgets per tenant (docs/sizing.md).
var (
	wantSeriesPerTenant  = budget.Defaults().Series.PerTenant
	wantCgroupsPerTenant = budget.Defaults().Cgroups.PerTenant
	wantSampledPerTenant = budget.Defaults().SampledCgroups.PerTenant
)

type tenantScrape struct {
	series                 int
	cgroups, sampled, keys map[string]bool
	// skips are what the budgets left out, by "budget/reason", of this tenant.
	skips map[string]budget.Skip
	// counted are quota_exporter_budget_skipped_total by "budget/reason".
	counted map[string]float64
}

// scrapeTenants runs a default exporter's collectors over cfg and counts each tenant's
// series (a tenant here is a top-level cgroup).
func scrapeTenants(t *testing.T, cfg Config, window time.Duration, tenants ...string) []tenantScrape {
	t.Helper()
	env, set := defaultExporter(t, cfg)
	defer set.Close()
	mfs := gatherSampled(t, set, window)
	self := testutil.Families(t, selfRegistry(env))
	var out []tenantScrape
	for _, tn := range tenants {
		var s tenantScrape
		s.series, s.cgroups, s.sampled, s.keys = tenantSeries(mfs, tn)
		s.skips = map[string]budget.Skip{}
		for _, sk := range env.Budgets.Skips() {
			if sk.Tenant == tn {
				s.skips[sk.Budget+"/"+sk.Reason] = sk
			}
		}
		s.counted = map[string]float64{}
		for _, m := range self["quota_exporter_budget_skipped_total"].GetMetric() {
			b, _ := labelValue(m, "budget")
			r, _ := labelValue(m, "reason")
			s.counted[b+"/"+r] = m.GetCounter().GetValue()
		}
		out = append(out, s)
	}
	return out
}

// selfRegistry gathers env's self-metrics (as main registers them with its own registry).
func selfRegistry(env *Env) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(env.Errors, env.Stuck, env.Budgets)
	return reg
}

// stuckJavas is how many processes of the hostile tenant of TestStuckReadsBudgetedPerTenant
// block a read: more than the node-wide cap of stuck reads (64) before budgets.
const stuckJavas = 80

// A tenant's processes whose files block in the kernel (80 processes named java whose
// /etc/passwd is a file on the tenant's own FUSE mount, whose server never answers) cost
// that tenant its own reads only: the calm tenant beside it keeps its cgroup series, its
// processes and its per-second throttling samples in every scrape, and the stuck reads stop
// at the tenant's budget, not at the node-wide cap.
func TestStuckReadsBudgetedPerTenant(t *testing.T) {
	const window = 250 * time.Millisecond
	fuse := testutil.MountStuckFUSE(t)
	jail := testutil.NewJail(t)
	jail.Install(t, testutil.Sleeper(t), "/bin/java")
	jail.MkdirAll(t, "/fuse")
	if err := unix.Mount(fuse.Mnt, jail.Path("/fuse"), "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mount the FUSE file system into the jail: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(jail.Path("/fuse"), unix.MNT_DETACH) })
	jail.Symlink(t, "/fuse/data", "/etc/passwd") // read by JVM detection when there is no perf data

	calm := testutil.NewTopCgroup(t, "calm", testutil.CgroupOptions{QuotaUS: 50000, MemoryLimit: 256 << 20})
	java := filepath.Join(t.TempDir(), "java")
	testutil.CopyFile(t, "/bin/sleep", java, 0o755)
	calmPIDs := []int{startIn(t, calm, "sleep", "600").Process.Pid, startIn(t, calm, java, "600").Process.Pid}
	hostile := testutil.NewTopCgroup(t, "stuck", testutil.CgroupOptions{})
	for range stuckJavas {
		pid := strconv.Itoa(jail.Start(t, "/bin/java", nil).Process.Pid)
		for _, ctl := range []string{"cpu", "cpuacct", "memory"} {
			hostile.Write(ctl, "cgroup.procs", pid)
		}
	}
	t.Cleanup(func() {
		fuse.Answer()
		waitUntil(t, func() bool { return procread.Stuck() == 0 })
	})

	env, set := defaultExporter(t, Config{ProcPath: "/proc", SysPath: "/sys", ThrottleWindow: window, ProcessMinResident: 0,
		CgroupInclude: anchoredPaths(calm.Path, hostile.Path)})
	defer set.Close()
	const scrapeTimeout = 4 * time.Second
	time.Sleep(4 * window) // the sampler's first windows
	var lastWindows uint64
	for i := range 8 {
		mfs, err := set.Gather(context.Background(), scrapeTimeout)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, keys := tenantSeries(mfs, calm.Path)
		var missing []string
		for _, want := range []string{"quota_cpu_usage_seconds_total", "quota_cpu_limit_cores", "quota_memory_usage_bytes", "quota_cpu_throttled_window_ratio"} {
			if !hasKeyPrefix(keys, want+"{") {
				missing = append(missing, want)
			}
		}
		for _, pid := range calmPIDs {
			if !hasPID(mfs, pid) {
				missing = append(missing, fmt.Sprintf("quota_process_info{pid=%d}", pid))
			}
		}
		windows := histogramCount(mfs, "quota_cpu_throttled_window_ratio", calm.Path)
		t.Logf("scrape %d: stuck reads node-wide %d; calm tenant's sampler windows %d; missing %v", i, procread.Stuck(), windows, missing)
		if len(missing) > 0 {
			t.Errorf("scrape %d: the calm tenant lacks %v while the hostile tenant's reads are stuck (%d node-wide)", i, missing, procread.Stuck())
		}
		if i > 0 && windows <= lastWindows {
			t.Errorf("scrape %d: the sampler observed no window of the calm cgroup since the last scrape (%d)", i, windows)
		}
		lastWindows = windows
		time.Sleep(2 * window)
	}
	if n := procread.Stuck(); n > wantStuckPerTenant {
		t.Errorf("the hostile tenant holds %d stuck reads, budget %d", n, wantStuckPerTenant)
	}
	// The tenant at its budget is named, and its refused reads are counted.
	var named bool
	for _, sk := range env.Budgets.Skips() {
		named = named || (sk.Budget == budget.StuckReads && sk.Tenant == hostile.Path && sk.Name == hostile.Path && sk.Kept == wantStuckPerTenant)
	}
	self := testutil.Families(t, selfRegistry(env))
	refused := 0.0
	for _, m := range self["quota_exporter_budget_skipped_total"].GetMetric() {
		if b, _ := labelValue(m, "budget"); b == budget.StuckReads {
			if r, _ := labelValue(m, "reason"); r == budget.ReasonTenant {
				refused = m.GetCounter().GetValue()
			}
		}
	}
	if !named || refused == 0 {
		t.Errorf("the hostile tenant is named %v, its refused reads counted %v: %+v", named, refused, env.Budgets.Skips())
	}
}

// wantStuckPerTenant is the default budget of stuck reads per tenant (docs/sizing.md).
var wantStuckPerTenant = budget.Defaults().StuckReads.PerTenant

func hasKeyPrefix(keys map[string]bool, prefix string) bool {
	for k := range keys {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// hasPID reports whether quota_process_info has the process.
func hasPID(mfs []*dto.MetricFamily, pid int) bool {
	for _, mf := range mfs {
		if mf.GetName() != "quota_process_info" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v, _ := labelValue(m, "pid"); v == strconv.Itoa(pid) {
				return true
			}
		}
	}
	return false
}

// histogramCount is the sample count of a histogram of one cgroup (0 when absent).
func histogramCount(mfs []*dto.MetricFamily, name, cgroup string) uint64 {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v, _ := labelValue(m, "cgroup"); v == cgroup {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// Cgroups and processes whose names differ only in a control character (a tenant's mkdir and
// its executables' names) are two series each, not one duplicated: the scrape has no error
// and each of them has its own label value, cleaned of the control character.
func TestControlCharacterNamesStayDistinct(t *testing.T) {
	parent := testutil.NewTopCgroup(t, "ctl", testutil.CgroupOptions{})
	for _, name := range []string{"dup\x01", "dup\x02", "dup\uFFFD"} { // the third is what the first two clean to
		parent.Child(name, testutil.CgroupOptions{QuotaUS: 50000})
	}
	dir := t.TempDir()
	for _, name := range []string{"sl\x01", "sl\x02"} {
		exe := filepath.Join(dir, name)
		testutil.CopyFile(t, "/bin/sleep", exe, 0o755)
		startIn(t, parent, exe, "600")
	}
	waitUntil(t, func() bool { return len(parent.PIDs()) == 2 })
	env, err := NewEnv(Config{ProcPath: "/proc", SysPath: "/sys", CgroupInclude: anchoredPaths(parent.Path)}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewSet(env, []string{"cpu", "memory", "process"})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	for i := range 3 {
		mfs, err := set.Gather(context.Background(), 10*time.Second)
		if err != nil {
			t.Fatalf("scrape %d: %v", i, err)
		}
		cgroups, processes := map[string]bool{}, map[string]bool{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				cg, _ := labelValue(m, "cgroup")
				if mf.GetName() == "quota_cpu_limit_cores" {
					cgroups[cg] = true
				}
				if p, ok := labelValue(m, "process"); ok && mf.GetName() == "quota_process_info" {
					processes[p] = true
				}
			}
		}
		if len(cgroups) != 3 || len(processes) != 2 {
			t.Fatalf("scrape %d: cgroups %q, processes %q: want 3 and 2 distinct", i, keysOf(cgroups), keysOf(processes))
		}
		for _, v := range append(keysOf(cgroups), keysOf(processes)...) {
			if strings.ContainsAny(v, "\x01\x02") {
				t.Errorf("label value %q keeps a control character", v)
			}
		}
	}
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
