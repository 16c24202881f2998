package jvm

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/hsperfdata"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

func TestParseVMArgs(t *testing.T) {
	f := ParseVMArgs("-Xmx2g -Dpassword=x -XX:ActiveProcessorCount=16 -XX:+UseG1GC -XX:-UseContainerSupport " +
		"-XX:ParallelGCThreads=3 -XX:ConcGCThreads=1 -XX:CICompilerCount=4 -XX:-TieredCompilation " +
		"-XX:+UseZGC -XX:+ZGenerational -XX:-UsePerfData -XX:+PerfDisableSharedMem -XX:ActiveProcessorCount=bad")
	want := Flags{ActiveProcessorCount: 16, UseContainerSupport: Off, ParallelGCThreads: 3, ConcGCThreads: 1,
		CICompilerCount: 4, TieredCompilation: Off, GC: GCZ, ZGenerational: On, UsePerfData: Off,
		PerfDisableSharedMem: On, MaxHeapBytes: 2 << 30}
	if f != want {
		t.Errorf("got %+v\nwant %+v", f, want)
	}
	if !f.PerfDataDisabled() || ParseVMArgs("-Xmx1m").PerfDataDisabled() {
		t.Error("PerfDataDisabled")
	}
	if g := ParseVMArgs("-XX:+UseParallelGC -XX:-UseParallelGC").GC; g != GCUnknown {
		t.Errorf("disabled GC flag: %q", g)
	}
	if h := ParseVMArgs("-XX:MaxHeapSize=512m").MaxHeapBytes; h != 512<<20 {
		t.Errorf("MaxHeapSize %d", h)
	}
}

func TestParseCmdline(t *testing.T) {
	for _, tc := range []struct {
		argv     []string
		main     string
		nOpts    int
		firstOpt string
	}{
		{[]string{"-Xmx1g", "-cp", "/a:/b", "com.example.Main", "--secret", "x"}, "com.example.Main", 1, "-Xmx1g"},
		{[]string{"-XX:+UseG1GC", "-jar", "/opt/app/service-1.2.jar", "-Dnot=an-option"}, "service-1.2", 1, "-XX:+UseG1GC"},
		{[]string{"--module-path", "mods", "-m", "my.mod/org.x.App", "arg"}, "org.x.App", 0, ""},
		{[]string{"--module=my.mod/org.x.App"}, "org.x.App", 0, ""},
		{[]string{"-version"}, "", 1, "-version"},
		{[]string{"@argfile", "Main"}, "Main", 0, ""},
		{[]string{"-jar"}, "", 0, ""},
	} {
		opts, main := ParseCmdline(tc.argv)
		if main != tc.main || len(opts) != tc.nOpts || tc.nOpts > 0 && opts[0] != tc.firstOpt {
			t.Errorf("%q: main %q opts %q", tc.argv, main, opts)
		}
	}
	for in, want := range map[string]string{
		"QuotaBusy idle":                   "QuotaBusy",
		"/app/lib/server.jar --port 80":    "server",
		"my.mod/org.x.App a b":             "org.x.App",
		"":                                 "",
		strings.Repeat("x", 300) + " args": strings.Repeat("x", maxNameLen),
	} {
		if got := MainFromJavaCommand(in); got != want {
			t.Errorf("MainFromJavaCommand(%.20q) = %q want %q", in, got, want)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{
		"17.0.15": {17, 0, 15}, "11.0.13+8": {11, 0, 13}, "21": {21, 0, 0}, "25-ea": {25, 0, 0},
		"1.8.0_372": {8, 0, 372}, "1.8.0": {8, 0, 0},
	} {
		if got, ok := ParseVersion(in); !ok || got != want {
			t.Errorf("%q: %+v %v", in, got, ok)
		}
	}
	for _, bad := range []string{"", "abc", "x.1"} {
		if _, ok := ParseVersion(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	// values from the fixtures' sun.rt.jvmVersion
	for in, want := range map[int64]Version{285216518: {17, 0, 15}, 184552712: {11, 0, 13}, 352323593: {21, 0, 8}} {
		if got, ok := VersionFromPerfData(in); !ok || got != want {
			t.Errorf("%d: %+v", in, got)
		}
	}
}

func TestCPUCount(t *testing.T) {
	v17 := Version{17, 0, 15}
	v11old := Version{11, 0, 13}
	v11new := Version{11, 0, 20}
	v17old := Version{17, 0, 3}
	nf := NoFlags()
	apc := NoFlags()
	apc.ActiveProcessorCount = 16
	noCS := NoFlags()
	noCS.UseContainerSupport = Off
	noPref := NoFlags()
	noPref.PreferContainerQuotaForCPUCount = Off
	for _, tc := range []struct {
		name string
		v    Version
		f    Flags
		cg   CgroupCPU
		want int
		src  CPUSource
	}{
		{"flag wins", v17, apc, CgroupCPU{QuotaUS: 100000, PeriodUS: 100000, Affinity: 2}, 16, CPUFromFlag},
		{"quota 1", v17, nf, CgroupCPU{QuotaUS: 100000, PeriodUS: 100000, Affinity: 8}, 1, CPUFromQuota},
		{"quota 1.5 rounds up", v17, nf, CgroupCPU{QuotaUS: 150000, PeriodUS: 100000, Affinity: 8}, 2, CPUFromQuota},
		{"quota above affinity", v17, nf, CgroupCPU{QuotaUS: 800000, PeriodUS: 100000, Affinity: 4}, 4, CPUFromContainer},
		{"no limit", v17, nf, CgroupCPU{Affinity: 6}, 6, CPUFromAffinity},
		{"no container support", v17, noCS, CgroupCPU{QuotaUS: 100000, PeriodUS: 100000, Affinity: 8}, 8, CPUFromAffinity},
		{"17.0.15 ignores shares", v17, nf, CgroupCPU{Shares: 512, Affinity: 8}, 8, CPUFromAffinity},
		{"17.0.3 uses shares", v17old, nf, CgroupCPU{Shares: 2048, Affinity: 8}, 2, CPUFromShares},
		{"11.0.13 uses shares, 512 → 1", v11old, nf, CgroupCPU{Shares: 512, Affinity: 8}, 1, CPUFromShares},
		{"11.0.13 shares 1024 unset", v11old, nf, CgroupCPU{Shares: 1024, Affinity: 8}, 8, CPUFromAffinity},
		{"11.0.20 ignores shares", v11new, nf, CgroupCPU{Shares: 512, Affinity: 8}, 8, CPUFromAffinity},
		{"old: quota preferred over shares", v11old, nf, CgroupCPU{QuotaUS: 300000, PeriodUS: 100000, Shares: 1024 * 2, Affinity: 8}, 3, CPUFromQuota},
		{"old: min with -PreferContainerQuota", v11old, noPref, CgroupCPU{QuotaUS: 300000, PeriodUS: 100000, Shares: 2048, Affinity: 8}, 2, CPUFromShares},
		{"v2 weight 100 unset", v11old, nf, CgroupCPU{V2: true, Weight: 100, Affinity: 8}, 8, CPUFromAffinity},
		{"v2 weight 200 → 5120 shares", Version{15, 0, 2}, nf, CgroupCPU{V2: true, Weight: 200, Affinity: 8}, 5, CPUFromShares},
		{"v2 on 11.0.13 unsupported", v11old, nf, CgroupCPU{V2: true, QuotaUS: 100000, PeriodUS: 100000, Affinity: 8}, 1 * 8, CPUFromAffinity},
		{"v2 on 11.0.16", Version{11, 0, 16}, nf, CgroupCPU{V2: true, QuotaUS: 100000, PeriodUS: 100000, Affinity: 8}, 1, CPUFromQuota},
		{"8u181 no container support", Version{8, 0, 181}, nf, CgroupCPU{QuotaUS: 100000, PeriodUS: 100000, Affinity: 8}, 8, CPUFromAffinity},
		{"8u191", Version{8, 0, 191}, nf, CgroupCPU{QuotaUS: 100000, PeriodUS: 100000, Affinity: 8}, 1, CPUFromQuota},
		{"unknown version: current rules", Version{}, nf, CgroupCPU{QuotaUS: 200000, PeriodUS: 100000, Shares: 512, Affinity: 8}, 2, CPUFromQuota},
		{"affinity unknown", v17, nf, CgroupCPU{}, 1, CPUFromAffinity},
	} {
		got, src := CPUCount(tc.v, tc.f, tc.cg)
		if got != tc.want || src != tc.src {
			t.Errorf("%s: %d (%s), want %d (%s)", tc.name, got, src, tc.want, tc.src)
		}
	}
	// weight→shares mapping of CgroupV2Subsystem::cpu_shares
	for w, want := range map[int64]int64{1: 1024, 50: 1024, 200: 5120, 10000: 262144} {
		if got := effectiveShares(CgroupCPU{V2: true, Weight: w}); got != want {
			t.Errorf("weight %d → %d shares, want %d", w, got, want)
		}
	}
}

// Expected values are -XX:+PrintFlagsFinal output (JDK 17.0.15, -Xmx4g for ZGC; CMS from
// 11.0.13); TestConfiguredThreadsMatchJDK recomputes them from the installed java.
func TestConfiguredThreadsTable(t *testing.T) {
	v17 := Version{17, 0, 15}
	nf := NoFlags()
	type row struct{ n, p, c, ci int }
	table := map[GC][]row{
		GCG1:         {{1, 1, 1, 2}, {2, 2, 1, 2}, {4, 4, 1, 3}, {8, 8, 2, 4}, {9, 8, 2, 4}, {12, 10, 3, 4}, {16, 13, 3, 12}, {24, 18, 5, 12}, {32, 23, 6, 15}, {64, 43, 11, 18}},
		GCParallel:   {{1, 1, 0, 2}, {16, 13, 0, 12}, {64, 43, 0, 18}},
		GCSerial:     {{1, 0, 0, 2}, {16, 0, 0, 12}},
		GCZ:          {{1, 1, 1, 2}, {3, 2, 1, 2}, {8, 5, 2, 4}, {9, 6, 3, 4}, {16, 10, 4, 12}, {64, 39, 16, 18}},
		GCShenandoah: {{1, 1, 1, 2}, {2, 1, 1, 2}, {3, 1, 1, 2}, {12, 6, 3, 4}, {16, 8, 4, 12}, {64, 32, 16, 18}},
	}
	for gc, rows := range table {
		for _, r := range rows {
			got := ConfiguredThreads(v17, gc, r.n, nf, 4<<30)
			if got.ParallelGC != r.p || got.ConcurrentGC != r.c || got.JIT != r.ci {
				t.Errorf("%s n=%d: %+v want P=%d C=%d CI=%d", gc, r.n, got, r.p, r.c, r.ci)
			}
		}
	}
	v11 := Version{11, 0, 13}
	for _, r := range []row{{4, 4, 0, 3}, {8, 8, 2, 4}, {16, 13, 4, 12}, {64, 43, 11, 18}} {
		if got := ConfiguredThreads(v11, GCCMS, r.n, nf, 0); got.ParallelGC != r.p || got.ConcurrentGC != r.c {
			t.Errorf("cms n=%d: %+v", r.n, got)
		}
	}
	if got := ConfiguredThreads(v11, GCZ, 16, nf, 0); got.ConcurrentGC != 2 || got.ParallelGC != 10 {
		t.Errorf("zgc 11 n=16: %+v", got)
	}
	// ZGC heap cap: 2% of the heap in 2 MiB pages
	for heap, want := range map[int64]int{64 << 20: 1, 512 << 20: 5, 1 << 30: 10} {
		if got := ConfiguredThreads(v17, GCZ, 16, nf, heap); got.ParallelGC != want || got.ConcurrentGC != min(4, want) {
			t.Errorf("zgc heap %d: %+v want P=%d", heap, got, want)
		}
	}
	f := NoFlags()
	f.ParallelGCThreads = 4
	if got := ConfiguredThreads(v17, GCG1, 64, f, 0); got.ParallelGC != 4 || got.ConcurrentGC != 1 {
		t.Errorf("explicit ParallelGCThreads: %+v", got)
	}
	if got := ConfiguredThreads(v17, GCG1, 16, nf, 0); got.C1 != 4 || got.C2 != 8 {
		t.Errorf("C1/C2 split: %+v", got)
	}
	f = NoFlags()
	f.TieredCompilation = Off
	if got := ConfiguredThreads(v17, GCG1, 16, f, 0); got.JIT != 12 || got.C1 != 0 || got.C2 != 12 {
		t.Errorf("non-tiered 17: %+v", got)
	}
	if got := ConfiguredThreads(v11, GCG1, 16, f, 0); got.JIT != 2 {
		t.Errorf("non-tiered 11: %+v", got)
	}
	if DefaultGC(1, 0) != GCSerial || DefaultGC(2, 1<<30) != GCSerial || DefaultGC(2, 2<<30) != GCG1 {
		t.Error("DefaultGC")
	}
}

func TestClassifyThread(t *testing.T) {
	for kind, names := range map[ThreadKind][]string{
		ThreadGC: {"GC Thread#0", "GC Thread#12", "ParGC Thread#3", "G1 Main Marker", "G1 Conc#0", "G1 Refine#0",
			"G1 Service", "G1 Young RemSet", "CMS Main Thread", "CMS Thread#0", "ZDirector", "ZDriver", "ZStat",
			"ZWorker#0", "ZUncommitter", "ZUnmapper", "RuntimeWorker#0", "XWorker#1", "XDriver", "ZDriverMajor",
			"ZDriverMinor", "ZWorkerYoung#0", "ZWorkerOld#3", "Shenandoah GC T", "Shenandoah Cont",
			"ShenandoahContr", "GC task thread#", "Gang worker#0 (", "Concurrent Mark-"},
		ThreadJIT: {"C1 CompilerThre", "C2 CompilerThre", "Sweeper thread"},
		ThreadVM: {"VM Thread", "VM Periodic Tas", "Reference Handl", "Finalizer", "Signal Dispatch", "Service Thread",
			"Common-Cleaner", "Monitor Deflati", "Notification Th", "Attach Listener", "Safepoint Clean"},
		ThreadApp: {"java", "quota-worker", "http-nio-8080-e", "pool-1-thread-1", "GC", "main", "VM Threadx"},
	} {
		for _, n := range names {
			if got := ClassifyThread(n + "\n"); got != kind {
				t.Errorf("%q: %s want %s", n, got, kind)
			}
		}
	}
}

func loadSnapshot(t *testing.T, name string) *hsperfdata.Snapshot {
	t.Helper()
	s, err := hsperfdata.Parse(loadFixtureBytes(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// loadFixtureBytes reads a perf data fixture of the hsperfdata package.
func loadFixtureBytes(t *testing.T, name string) []byte {
	t.Helper()
	return testutil.ReadGzip(t, filepath.Join("..", "hsperfdata", "testdata", name+".hsperf.gz"))
}

// The real fixtures from JDK 11, 17 and 21: GC detection, collector normalisation, units.
func TestCountersFromFixtures(t *testing.T) {
	for _, tc := range []struct {
		name string
		gc   GC
		kind []Collector
	}{
		{"jdk11-g1", GCG1, []Collector{CollectorYoung, CollectorFull, CollectorConcurrent}},
		{"jdk11-parallel", GCParallel, []Collector{CollectorYoung, CollectorFull}},
		{"jdk17-g1", GCG1, []Collector{CollectorYoung, CollectorFull, CollectorConcurrent}},
		{"jdk17-parallel", GCParallel, []Collector{CollectorYoung, CollectorFull}},
		{"jdk17-zgc", GCZ, []Collector{CollectorConcurrent}},
		{"jdk17-shenandoah", GCShenandoah, []Collector{CollectorYoung, CollectorConcurrent}},
		{"jdk21-g1", GCG1, []Collector{CollectorYoung, CollectorFull, CollectorConcurrent}},
		{"jdk21-zgc-generational", GCZGenerational, []Collector{CollectorYoung, CollectorConcurrent}},
	} {
		s := loadSnapshot(t, tc.name)
		c := ReadCounters(s)
		if g := GCFromCollectors(c.CollectorNames); g != tc.gc {
			t.Errorf("%s: gc %q from %q", tc.name, g, c.CollectorNames)
		}
		if len(c.GC) != len(tc.kind) {
			t.Errorf("%s: collectors %v", tc.name, c.GC)
		}
		var pauses int64
		for _, k := range tc.kind {
			if _, ok := c.GC[k]; !ok {
				t.Errorf("%s: no %s collector in %v", tc.name, k, c.GC)
			}
			pauses += c.GC[k].Pauses
		}
		sp, _ := s.Int("sun.rt.safepoints")
		spt, _ := s.Int("sun.rt.safepointTime")
		if c.Safepoints != sp || c.SafepointSeconds != float64(spt)/1e9 || pauses == 0 || c.Safepoints == 0 {
			t.Errorf("%s: safepoints %d/%v pauses %d", tc.name, c.Safepoints, c.SafepointSeconds, pauses)
		}
		if c.JITSeconds <= 0 || c.JITSeconds > 60 {
			t.Errorf("%s: jit %v s", tc.name, c.JITSeconds)
		}
		// -Xmx64m in every fixture
		if c.HeapMaxBytes < 60<<20 || c.HeapMaxBytes > 70<<20 {
			t.Errorf("%s: heap max %d", tc.name, c.HeapMaxBytes)
		}
		if c.HeapCommittedBytes <= 0 || c.HeapCommittedBytes > 70<<20 || c.HeapUsedBytes <= 0 || c.HeapUsedBytes > c.HeapCommittedBytes {
			t.Errorf("%s: heap committed %d used %d", tc.name, c.HeapCommittedBytes, c.HeapUsedBytes)
		}
		if c.MetaspaceUsedBytes <= 0 || c.VMStartSeconds < 1.6e9 {
			t.Errorf("%s: metaspace %d start %v", tc.name, c.MetaspaceUsedBytes, c.VMStartSeconds)
		}
		args, _ := s.String("java.rt.vmArgs")
		if f := ParseVMArgs(args); f.MaxHeapBytes != 64<<20 || (f.GC != tc.gc && !(tc.gc == GCZGenerational && f.GC == GCZ && f.ZGenerational == On)) {
			t.Errorf("%s: flags %+v", tc.name, f)
		}
	}
	if NormalizeCollector("Some future full thing") != CollectorFull || NormalizeCollector("X minor") != CollectorYoung ||
		NormalizeCollector("odd") != CollectorConcurrent {
		t.Error("fallback normalisation")
	}
}

func TestParseStatus(t *testing.T) {
	st := parseStatus([]byte("Name:\tjava\nUid:\t1000\t1001\t1001\t1001\nNSpid:\t4242\t17\t1\nCpus_allowed_list:\t0-3,8,10-11\n"), 4242)
	if st.NSPid != 1 || st.UID != 1001 || st.Affinity != 7 {
		t.Errorf("%+v", st)
	}
	if st := parseStatus([]byte("Name:\tjava\n"), 5); st.NSPid != 5 || st.UID != -1 {
		t.Errorf("no NSpid: %+v", st)
	}
}

// JDK 24+ sizes itself for the lowest limit on its cgroup's path (JDK-8322420); older JDKs
// see their own cgroup only. The truth behind it is checked in the v2 VM (test/v2).
func TestSeenByAncestors(t *testing.T) {
	podOnly := CgroupCPU{V2: true, Affinity: 4, AncestorQuotaUS: 200000, AncestorPeriodUS: 100000, AncestorMemoryBytes: 512 << 20}
	own := CgroupCPU{V2: true, Affinity: 4, QuotaUS: 100000, PeriodUS: 100000, MemoryLimitBytes: 256 << 20,
		AncestorQuotaUS: 200000, AncestorPeriodUS: 100000, AncestorMemoryBytes: 512 << 20}
	for _, tc := range []struct {
		name string
		v    Version
		cg   CgroupCPU
		cpus int
		mem  int64
	}{
		{"17.0.15, pod limit only: host CPUs", Version{17, 0, 15}, podOnly, 4, 0},
		{"21.0.8, pod limit only: host CPUs", Version{21, 0, 8}, podOnly, 4, 0},
		{"25.0.3, pod limit only: the pod's", Version{25, 0, 3}, podOnly, 2, 512 << 20},
		{"24, own limit smaller: its own", Version{24, 0, 0}, own, 1, 256 << 20},
		{"unknown version: current rules", Version{}, podOnly, 2, 512 << 20},
		{"25 on v1 too", Version{25, 0, 3}, CgroupCPU{Affinity: 4, AncestorQuotaUS: 100000, AncestorPeriodUS: 100000}, 1, 0},
	} {
		seen := tc.cg.SeenBy(tc.v)
		if n, _ := CPUCount(tc.v, NoFlags(), seen); n != tc.cpus || seen.MemoryLimitBytes != tc.mem {
			t.Errorf("%s: %d CPUs, memory %d; want %d, %d", tc.name, n, seen.MemoryLimitBytes, tc.cpus, tc.mem)
		}
	}
}
