package v2

import (
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/quota-exporter/quota_exporter/test/v2/vm"
)

// scrape parses the exporter's exposition from the VM.
type scrape map[string]*dto.MetricFamily

func parseScrape(t *testing.T, text string) scrape {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return mfs
}

// value returns the series of name for cgroup (a path without the leading slash) whose
// labels include the given pairs.
func (s scrape) value(name, cgroup string, pairs ...string) (float64, bool) {
	mf := s[name]
	if mf == nil {
		return 0, false
	}
	want := map[string]string{"cgroup": "/" + cgroup}
	for i := 0; i+1 < len(pairs); i += 2 {
		want[pairs[i]] = pairs[i+1]
	}
	for _, m := range mf.Metric {
		ok := 0
		for _, l := range m.Label {
			if v, has := want[l.GetName()]; has && v == l.GetValue() {
				ok++
			}
		}
		if ok == len(want) {
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Untyped != nil:
				return m.Untyped.GetValue(), true
			}
		}
	}
	return 0, false
}

func (s scrape) label(name, cgroup, label string) string {
	for _, m := range s[name].GetMetric() {
		var cg, v string
		for _, l := range m.Label {
			switch l.GetName() {
			case "cgroup":
				cg = l.GetValue()
			case label:
				v = l.GetValue()
			}
		}
		if cg == "/"+cgroup {
			return v
		}
	}
	return ""
}

// kernel is one dump of the cgroups' files.
type kernel map[string]string

// keyed returns the value of key in a "key value" file, or a PSI line's total
// (key "some"/"full"), scaled.
func (k kernel) keyed(cgroup, file, key string) (float64, bool) {
	for _, line := range strings.Split(k[cgroup+"/"+file], "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != key {
			continue
		}
		if strings.HasSuffix(file, ".pressure") {
			for _, kv := range f[1:] {
				if v, ok := strings.CutPrefix(kv, "total="); ok {
					n, err := strconv.ParseFloat(v, 64)
					return n, err == nil
				}
			}
			return 0, false
		}
		n, err := strconv.ParseFloat(f[1], 64)
		return n, err == nil
	}
	return 0, false
}

// single returns a one-number file (memory.current, memory.max).
func (k kernel) single(cgroup, file string) (float64, bool) {
	n, err := strconv.ParseFloat(strings.TrimSpace(k[cgroup+"/"+file]), 64)
	return n, err == nil
}

type vmRun struct {
	res           *vm.Result
	scrape        scrape
	before, after kernel
}

func load(t *testing.T) vmRun {
	t.Helper()
	res := boot(t)
	r := vmRun{res: res, scrape: parseScrape(t, res.Section("scrape")),
		before: vm.Files(res.Section("files-before")), after: vm.Files(res.Section("files-after"))}
	if len(r.scrape) == 0 || len(r.before) == 0 {
		t.Fatalf("the VM printed no scrape or no kernel files; console:\n%s", res.Console)
	}
	return r
}

// between: the exporter read the file between the two dumps, so its value lies between
// them. The workloads are frozen, so CPU counters are equal in both; memory can still grow
// (seen: 83.7 -> 92.7 MB anon of the frozen C program; most likely khugepaged collapsing its
// pages into huge pages, as the cloud kernel has THP=always). Microsecond counters are
// compared after the exporter's scaling, with a relative slack for float rounding.
func between(got, a, b float64) bool {
	lo, hi := math.Min(a, b), math.Max(a, b)
	eps := 1e-9 * math.Max(1, math.Abs(hi))
	return got >= lo-eps && got <= hi+eps
}

type fileCheck struct {
	metric string
	pairs  []string
	file   string
	key    string  // "" for a one-number file
	scale  float64 // kernel value * scale = exported value
	need   bool    // the series must exist (else checked only where exported)
}

// The kernel file behind each per-cgroup series the exporter emits on v2.
var checks = []fileCheck{
	{"quota_cpu_usage_seconds_total", []string{"mode", "user"}, "cpu.stat", "user_usec", 1e-6, true},
	{"quota_cpu_usage_seconds_total", []string{"mode", "system"}, "cpu.stat", "system_usec", 1e-6, true},
	{"quota_cpu_periods_total", nil, "cpu.stat", "nr_periods", 1, false},
	{"quota_cpu_throttled_periods_total", nil, "cpu.stat", "nr_throttled", 1, false},
	{"quota_cpu_throttled_seconds_total", nil, "cpu.stat", "throttled_usec", 1e-6, false},
	{"quota_cpu_bursts_total", nil, "cpu.stat", "nr_bursts", 1, false},
	{"quota_cpu_burst_seconds_total", nil, "cpu.stat", "burst_usec", 1e-6, false},
	{"quota_cpu_pressure_waiting_seconds_total", nil, "cpu.pressure", "some", 1e-6, true},
	{"quota_cpu_pressure_stalled_seconds_total", nil, "cpu.pressure", "full", 1e-6, false},
	{"quota_cpu_weight", nil, "cpu.weight", "", 1, true},
	{"quota_memory_usage_bytes", nil, "memory.current", "", 1, true},
	{"quota_memory_rss_bytes", nil, "memory.stat", "anon", 1, true},
	{"quota_memory_cache_bytes", nil, "memory.stat", "file", 1, true},
	{"quota_memory_oom_kills_total", nil, "memory.events", "oom_kill", 1, true},
	{"quota_memory_pressure_waiting_seconds_total", nil, "memory.pressure", "some", 1e-6, true},
	{"quota_memory_pressure_stalled_seconds_total", nil, "memory.pressure", "full", 1e-6, true},
	// --memory.detail
	{"quota_memory_stat_bytes", []string{"type", "anon"}, "memory.stat", "anon", 1, true},
	{"quota_memory_stat_bytes", []string{"type", "file"}, "memory.stat", "file", 1, true},
	{"quota_memory_stat_bytes", []string{"type", "kernel"}, "memory.stat", "kernel", 1, false},
	{"quota_memory_stat_bytes", []string{"type", "sock"}, "memory.stat", "sock", 1, true},
	{"quota_memory_stat_bytes", []string{"type", "shmem"}, "memory.stat", "shmem", 1, true},
	{"quota_memory_stat_bytes", []string{"type", "anon_thp"}, "memory.stat", "anon_thp", 1, true},
	{"quota_memory_events_total", []string{"type", "high"}, "memory.events", "high", 1, true},
	{"quota_memory_events_total", []string{"type", "max"}, "memory.events", "max", 1, true},
	{"quota_memory_events_total", []string{"type", "oom"}, "memory.events", "oom", 1, true},
	{"quota_memory_events_total", []string{"type", "oom_group_kill"}, "memory.events", "oom_group_kill", 1, true},
	{"quota_memory_peak_bytes", nil, "memory.peak", "", 1, true},
	{"quota_memory_high_bytes", nil, "memory.high", "", 1, false},
}

// kubeletCgroup matches the last segment of a pod's or a container's cgroup under the systemd
// driver (docs/cgroups.md, node layouts).
var kubeletCgroup = regexp.MustCompile(`-pod[0-9a-f_]+\.slice$|^(cri-containerd|crio|docker)-[0-9a-f]{64}\.scope$`)

// containerCgroup matches the last segment of a container's cgroup: its OOM kills are
// memory.events' (its descendants are its own), every other cgroup's memory.events.local's.
var containerCgroup = regexp.MustCompile(`^(cri-containerd|crio|docker)-[0-9a-f]{64}\.scope$`)

// Every per-cgroup figure the exporter gives for the scenario's cgroups equals the kernel
// file read just before and just after the scrape (with the workloads frozen).
func TestFiguresEqualKernelFiles(t *testing.T) {
	r := load(t)
	compared := 0
	for _, cg := range watchedCgroups() {
		// Discovery watches the kubelet's pod and container cgroups whatever they hold, and other
		// cgroups with a process or a limit of their own; the scenario's intermediate slices
		// have neither.
		_, exported := r.scrape.value("quota_cpu_usage_seconds_total", cg, "mode", "user")
		own := func(file string) bool {
			v := strings.TrimSpace(r.before[cg+"/"+file])
			return v != "" && !strings.HasPrefix(v, "max")
		}
		hasProcs := strings.TrimSpace(r.before[cg+"/cgroup.procs"]) != ""
		if want := kubeletCgroup.MatchString(path.Base(cg)) || hasProcs || own("cpu.max") || own("memory.max"); want != exported {
			t.Errorf("%s: exported %v, but processes %v, cpu.max %q, memory.max %q", cg, exported, hasProcs,
				strings.TrimSpace(r.before[cg+"/cpu.max"]), strings.TrimSpace(r.before[cg+"/memory.max"]))
		}
		if !exported {
			continue
		}
		for _, c := range checks {
			if c.metric == "quota_memory_oom_kills_total" && !containerCgroup.MatchString(path.Base(cg)) {
				c.file = "memory.events.local"
			}
			got, ok := r.scrape.value(c.metric, cg, c.pairs...)
			if !ok {
				if c.need {
					t.Errorf("%s: %s %v missing", cg, c.metric, c.pairs)
				}
				continue
			}
			var a, b float64
			var okA, okB bool
			if c.key == "" {
				a, okA = r.before.single(cg, c.file)
				b, okB = r.after.single(cg, c.file)
			} else {
				a, okA = r.before.keyed(cg, c.file, c.key)
				b, okB = r.after.keyed(cg, c.file, c.key)
			}
			if !okA || !okB {
				t.Errorf("%s: exported %s but the VM's %s has no %q", cg, c.metric, c.file, c.key)
				continue
			}
			if !between(got, a*c.scale, b*c.scale) {
				t.Errorf("%s: %s%v = %v, kernel %s %s = %v before, %v after the scrape", cg, c.metric, c.pairs, got, c.file, c.key, a*c.scale, b*c.scale)
			}
			compared++
		}
		// Working set = memory.current - inactive_file, as cAdvisor computes it.
		if got, ok := r.scrape.value("quota_memory_working_set_bytes", cg); ok {
			ws := func(k kernel) float64 {
				cur, _ := k.single(cg, "memory.current")
				inact, _ := k.keyed(cg, "memory.stat", "inactive_file")
				return cur - inact
			}
			if !between(got, ws(r.before), ws(r.after)) {
				t.Errorf("%s: working set %v, memory.current - inactive_file = %v before, %v after", cg, got, ws(r.before), ws(r.after))
			}
		}
	}
	t.Logf("%d exported figures of %d cgroups equal the kernel's files", compared, len(watchedCgroups()))
}

// The throttled container: 2 burners under 0.2 cores are throttled by their own cpu.max,
// and the exporter shows the kernel's counts; its limits are cpu.max and memory.max.
func TestThrottledContainer(t *testing.T) {
	r := load(t)
	per, _ := r.scrape.value("quota_cpu_periods_total", throttled)
	thr, _ := r.scrape.value("quota_cpu_throttled_periods_total", throttled)
	sec, _ := r.scrape.value("quota_cpu_throttled_seconds_total", throttled)
	user, _ := r.scrape.value("quota_cpu_usage_seconds_total", throttled, "mode", "user")
	psi, _ := r.scrape.value("quota_cpu_pressure_waiting_seconds_total", throttled)
	mem, _ := r.scrape.value("quota_memory_usage_bytes", throttled)
	t.Logf("throttled container: periods %v, throttled %v (%.0f%%), throttled %.3f s, user %.3f s, cpu PSI some %.3f s, memory %v bytes",
		per, thr, 100*thr/per, sec, user, psi, mem)
	if thr == 0 || thr < per/2 {
		t.Errorf("2 burners under 0.2 cores: %v of %v periods throttled, want most", thr, per)
	}
	if lim, _ := r.scrape.value("quota_cpu_limit_cores", throttled); lim != 0.2 {
		t.Errorf("quota_cpu_limit_cores %v, want 0.2", lim)
	}
	if lim, _ := r.scrape.value("quota_memory_limit_bytes", throttled); lim != 128<<20 {
		t.Errorf("quota_memory_limit_bytes %v, want %v", lim, 128<<20)
	}
	if mem < 16<<20 {
		t.Errorf("memory usage %v: the container's 16 MiB tmpfs file is not charged", mem)
	}
	if got := r.scrape.label("quota_cpu_limit_cores", throttled, "qos_class"); got != "burstable" {
		t.Errorf("qos_class %q", got)
	}
	if got := r.scrape.label("quota_cpu_limit_cores", throttled, "pod_uid"); got != podA.uid {
		t.Errorf("pod_uid %q, want %s", got, podA.uid)
	}
	if got := r.scrape.label("quota_cpu_limit_cores", throttled, "container_id"); got != "containerd://"+hexID('a') {
		t.Errorf("container_id %q", got)
	}
}

// The v2 fact behind binding limits: the kernel counts throttling only on the cgroup
// whose own cpu.max throttles. The pod-limit-only container and the service under a
// limited slice show none of their own; their pod and slice do.
func TestThrottlingCountsOnlyOnTheBindingCgroup(t *testing.T) {
	r := load(t)
	for _, c := range []struct{ child, parent string }{{podOnly, podB.slice}, {service, batchSlice}} {
		childThr, _ := r.before.keyed(c.child, "cpu.stat", "nr_throttled")
		parentThr, ok := r.scrape.value("quota_cpu_throttled_periods_total", c.parent)
		t.Logf("%s: kernel nr_throttled %v; %s: exported throttled periods %v", c.child, childThr, c.parent, parentThr)
		if !ok || parentThr == 0 {
			t.Errorf("%s: a burner under its 0.3/0.5-core limit is not throttled (%v)", c.parent, parentThr)
		}
		if childThr != 0 {
			t.Errorf("%s: nr_throttled %v; this kernel was expected to count only the binding cgroup", c.child, childThr)
		}
		if _, ok := r.scrape.value("quota_cpu_throttled_periods_total", c.child); ok {
			t.Errorf("%s has no limit of its own, but the exporter gives it throttling series", c.child)
		}
	}
}

var settledRE = regexp.MustCompile(`(?m)^settled (\d+)$`)

// A Go 1.26 program (go.mod `go 1.26`) prints its own GOMAXPROCS; the exporter must say the
// same: with its own 0.5-core limit, and with the limit on the pod only (which the Go
// runtime does not see: it reads the leaf cgroup).
func TestGoMaxProcs(t *testing.T) {
	r := load(t)
	cpus, _ := strconv.Atoi(strings.TrimSpace(r.res.Section("nproc")))
	for _, c := range []struct {
		name, section, cgroup string
		want                  int
	}{
		{"own 0.5-core limit", "go-own", goOwnLimit, 2},
		{"limit on the pod only", "go-pod", podOnly, cpus},
	} {
		m := settledRE.FindStringSubmatch(r.res.Section(c.section))
		if m == nil {
			t.Errorf("%s: the program printed no settled line: %q", c.name, r.res.Section(c.section))
			continue
		}
		printed, _ := strconv.Atoi(m[1])
		got, ok := r.scrape.value("quota_go_gomaxprocs", c.cgroup)
		lim, _ := r.scrape.value("quota_cpu_limit_cores", c.cgroup)
		t.Logf("%s: program GOMAXPROCS %d, exporter %v (own limit %v cores, VM CPUs %d)", c.name, printed, got, lim, cpus)
		if !ok || got != float64(printed) {
			t.Errorf("%s: quota_go_gomaxprocs %v (present %v), the program's runtime.GOMAXPROCS(0) %d", c.name, got, ok, printed)
		}
		if printed != c.want {
			t.Errorf("%s: the program printed %d, expected %d", c.name, printed, c.want)
		}
	}
}

var (
	heapNrRE   = regexp.MustCompile(`<heap nr="(\d+)">`)
	subheapsRE = regexp.MustCompile(`<aspace type="subheaps" size="(\d+)"/>`)
)

// A dynamically linked C program (its glibc copied into the VM): the exporter's arena and
// heap counts equal its own malloc_info().
func TestMallocArenas(t *testing.T) {
	r := load(t)
	info := r.res.Section("arenas")
	if !strings.Contains(info, "READY") {
		t.Fatalf("the C program did not finish allocating: %q", info)
	}
	arenasN, heaps := 0, 0
	for _, m := range heapNrRE.FindAllStringSubmatch(info, -1) {
		if m[1] != "0" {
			arenasN++
		}
	}
	for _, m := range subheapsRE.FindAllStringSubmatch(info, -1) {
		n, _ := strconv.Atoi(m[1])
		heaps += n
	}
	gotA, okA := r.scrape.value("quota_process_malloc_arenas", arenas)
	gotH, okH := r.scrape.value("quota_process_malloc_heaps", arenas)
	limit, _ := r.scrape.value("quota_process_malloc_arena_limit", arenas)
	t.Logf("malloc_info: %d arenas, %d heaps; exporter %v arenas, %v heaps, limit %v", arenasN, heaps, gotA, gotH, limit)
	if !okA || !okH || gotA != float64(arenasN) || gotH != float64(heaps) {
		t.Errorf("exporter arenas/heaps %v/%v, malloc_info %d/%d", gotA, gotH, arenasN, heaps)
	}
	if _, ok := r.scrape.value("quota_process_allocator_info", arenas, "allocator", "glibc"); !ok {
		t.Error("quota_process_allocator_info{allocator=glibc} missing")
	}
}

// The limit that binds, on the real v2 layouts: a container's own limit when it is the
// smallest (ties go to the container), the pod's when the container has none, the slice's
// for a service; and the binding cgroup's throttling series are where a user joins them.
func TestBindingLimits(t *testing.T) {
	r := load(t)
	for _, c := range []struct {
		cgroup        string
		cores         float64
		cpuFrom       string
		memory        float64
		memFrom       string
		throttledFrom bool
	}{
		{throttled, 0.2, throttled, 128 << 20, throttled, true},
		{goOwnLimit, 0.5, goOwnLimit, 256 << 20, goOwnLimit, false},
		{podOnly, 0.5, podB.slice, 256 << 20, podB.slice, true},
		{arenas, 1, arenas, 512 << 20, arenas, false},
		{service, 0.3, batchSlice, 0, "", true},
		{idle, 0, "", 0, "", false},
	} {
		cores, okC := r.scrape.value("quota_cpu_binding_limit_cores", c.cgroup)
		from := r.scrape.label("quota_cpu_binding_limit_cores", c.cgroup, "binding_cgroup")
		mem, okM := r.scrape.value("quota_memory_binding_limit_bytes", c.cgroup)
		memFrom := r.scrape.label("quota_memory_binding_limit_bytes", c.cgroup, "binding_cgroup")
		t.Logf("%s: effective %v cores from %s, %v bytes from %s", c.cgroup, cores, from, mem, memFrom)
		if c.cpuFrom == "" {
			if okC {
				t.Errorf("%s: nothing on its path is limited, but binding CPU limit %v from %s", c.cgroup, cores, from)
			}
		} else if !okC || cores != c.cores || from != "/"+c.cpuFrom {
			t.Errorf("%s: binding CPU limit %v from %q, want %v from /%s", c.cgroup, cores, from, c.cores, c.cpuFrom)
		}
		if c.memFrom == "" {
			if okM {
				t.Errorf("%s: binding memory limit %v from %s, want none", c.cgroup, mem, memFrom)
			}
		} else if !okM || mem != c.memory || memFrom != "/"+c.memFrom {
			t.Errorf("%s: binding memory limit %v from %q, want %v from /%s", c.cgroup, mem, memFrom, c.memory, c.memFrom)
		}
		// The join of docs/cgroups.md: the binding cgroup's own throttled periods.
		if c.throttledFrom {
			n, ok := r.scrape.value("quota_cpu_throttled_periods_total", strings.TrimPrefix(from, "/"))
			t.Logf("  throttled periods of its binding cgroup %s: %v", from, n)
			if !ok || n == 0 {
				t.Errorf("%s: its binding cgroup %s shows no throttling (%v, present %v)", c.cgroup, from, n, ok)
			}
		}
	}
}

// An OOM kill of a container whose cgroup the runtime removes 200 ms later is still exported
// against the dead container's identity, exactly once; the restarted container has none.
func TestOOMKillOutlivesItsCgroup(t *testing.T) {
	r := load(t)
	after := parseScrape(t, r.res.Section("oom-scrape"))
	if len(after) == 0 {
		t.Fatalf("no scrape after the OOM kill; console:\n%s", r.res.Console)
	}
	t.Logf("pod memory.events after the kill:\n%s", r.res.Section("oom-pod-events"))
	old, ok := after.value("quota_memory_oom_kills_total", oomed, "container_id", "containerd://"+hexID('f'), "pod_uid", podE.uid)
	if !ok || old != 1 {
		t.Errorf("the removed container's quota_memory_oom_kills_total = %v (present %v), want 1", old, ok)
	}
	if n, ok := after.value("quota_memory_oom_kills_total", restarted); !ok || n != 0 {
		t.Errorf("the restarted container: %v (present %v), want 0", n, ok)
	}
	// The pod's memory.events repeats the container's kill; the exporter counts the pod's own
	// (memory.events.local), so that the kill is counted once.
	podKills := func(section string) float64 {
		t.Helper()
		k, ok := kernel{"pod/memory.events": r.res.Section(section)}.keyed("pod", "memory.events", "oom_kill")
		if !ok {
			t.Fatalf("no oom_kill in %s:\n%s", section, r.res.Section(section))
		}
		return k
	}
	if tree := podKills("oom-pod-events"); tree != 1 {
		t.Errorf("the pod's memory.events oom_kill %v, want 1 (the container's kill, counted up the hierarchy)", tree)
	}
	if n, _ := after.value("quota_memory_oom_kills_total", podE.slice); n != podKills("oom-pod-events-local") || n != 0 {
		t.Errorf("the pod's quota_memory_oom_kills_total %v, want its memory.events.local oom_kill %v, 0", n, podKills("oom-pod-events-local"))
	}
	t.Logf("removed container: oom kills %v; its pod: 0 (its memory.events: 1); restarted container: 0", old)

	// The late watcher: the second container's kill and removal happened while the exporter
	// was stopped; the pod's count gives it, once, and the first container keeps its 1.
	late := parseScrape(t, r.res.Section("oom-late-scrape"))
	t.Logf("pod memory.events after the second kill:\n%s", r.res.Section("oom-late-pod-events"))
	if n, ok := late.value("quota_memory_oom_kills_total", lateOOM, "container_id", "containerd://"+hexID('8')); !ok || n != 1 {
		t.Errorf("the container killed and removed while the exporter was stopped: %v (present %v), want 1", n, ok)
	}
	if n, _ := late.value("quota_memory_oom_kills_total", oomed); n != 1 {
		t.Errorf("the first removed container: %v after the second kill, want 1", n)
	}
	if tree := podKills("oom-late-pod-events"); tree != 2 {
		t.Errorf("the pod's memory.events oom_kill %v after the second kill, want 2", tree)
	}
	if n, _ := late.value("quota_memory_oom_kills_total", podE.slice); n != podKills("oom-late-pod-events-local") || n != 0 {
		t.Errorf("the pod's quota_memory_oom_kills_total %v after the second kill, want its memory.events.local oom_kill %v, 0", n, podKills("oom-late-pod-events-local"))
	}
}

// --memory.detail on the real v2 files: memory.high is exported where it is set and only
// there (the Go container's, as the kubelet's MemoryQoS sets it), and the figures of the
// throttled container's tmpfs file show up as shmem.
func TestMemoryDetail(t *testing.T) {
	r := load(t)
	for _, cg := range watchedCgroups() {
		high := strings.TrimSpace(r.before[cg+"/memory.high"])
		got, ok := r.scrape.value("quota_memory_high_bytes", cg)
		if _, exported := r.scrape.value("quota_memory_usage_bytes", cg); !exported {
			continue
		}
		if (high != "max" && high != "") != ok {
			t.Errorf("%s: memory.high %q, quota_memory_high_bytes %v (present %v)", cg, high, got, ok)
		}
	}
	if got, _ := r.scrape.value("quota_memory_high_bytes", goOwnLimit); got != 192<<20 {
		t.Errorf("quota_memory_high_bytes of the Go container %v, want %v", got, 192<<20)
	}
	shmem, _ := r.scrape.value("quota_memory_stat_bytes", throttled, "type", "shmem")
	peak, _ := r.scrape.value("quota_memory_peak_bytes", throttled)
	t.Logf("throttled container: shmem %v, peak %v", shmem, peak)
	if shmem < 16<<20 {
		t.Errorf("the throttled container's 16 MiB tmpfs file: shmem %v", shmem)
	}
}
