package collector

import (
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/hsperfdata"
	"github.com/quota-exporter/quota_exporter/exporter/internal/malloc"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// Benchmarks of the process and runtime collectors (issue 3): a scrape over 500 fixture
// processes, and one scrape of this host with 4 real JVMs.

// processCollectors are the collectors BenchmarkScrapeProcesses runs (plus discovery).
var processCollectors = []string{"process", "go", "jvm", "malloc"}

// procBootTime is the fixture's /proc/stat btime: before the hsperfdata fixtures were
// captured; each fixture JVM starts when its perf data says its VM began (startTicks).
const procBootTime = 1600000000

// procHostCounts says what a generated process host holds.
type procHostCounts struct {
	other, otherLarge, goProcs, jvms int
}

// processHost writes a v2 Kubernetes host with n processes, five per container, and a
// procfs for them: stat, status, comm, cmdline, environ, maps, task/*/comm, an exe symlink,
// and a sparse mem file. One process in 25 is a JVM (comm java, perf data under
// root/tmp/hsperfdata_root/<nspid> from the hsperfdata fixtures), three in 25 are Go (exe is
// this test binary, so build info is real), the rest are glibc programs (exe /bin/sleep),
// every other one above --process.min-resident. glibc processes have two arenas whose heap
// headers are written into mem at their addresses, so the malloc collector takes its exact
// (headers) path as it does on a real process; a sparse file on tmpfs reads faster than
// /proc/<pid>/mem does (no page-table walk under the target's mmap lock), see
// BenchmarkScrapeRealJVMs/malloc-inspect for the real cost.
func processHost(b testing.TB, root string, n int) procHostCounts {
	b.Helper()
	var cgs []fixture.Cgroup
	const perContainer = 5
	for c := 0; c*perContainer < n; c++ {
		uid := fmt.Sprintf("%08x_aaaa_bbbb_cccc_%012x", c/2, c/2)
		slice := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid + ".slice"
		if c%2 == 0 {
			cgs = append(cgs, fixture.Cgroup{Path: slice, QuotaUS: 400000, MemoryLimit: 4 << 30})
		}
		var pids []int
		for k := c * perContainer; k < min(n, (c+1)*perContainer); k++ {
			pids = append(pids, 10000+k)
		}
		cgs = append(cgs, fixture.Cgroup{Path: fmt.Sprintf("%s/cri-containerd-%064x.scope", slice, c), PIDs: pids,
			QuotaUS: 200000, MemoryLimit: 2 << 30, MemUsage: 1 << 30, Anon: 900 << 20, File: 100 << 20})
	}
	if err := fixture.Write(root, fixture.V2, cgs); err != nil {
		b.Fatal(err)
	}
	proc := filepath.Join(root, "proc")
	must(b, os.WriteFile(filepath.Join(proc, "stat"), []byte(fmt.Sprintf(
		"cpu  1000 0 1000 100000 0 0 0 0 0 0\ncpu0 500 0 500 50000 0 0 0 0 0 0\ncpu1 500 0 500 50000 0 0 0 0 0 0\n"+
			"intr 0\nctxt 1000\nbtime %d\nprocesses 20000\nprocs_running 1\nprocs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n", procBootTime)), 0o644))
	goExe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	perf := hsperfFixtures(b)
	var counts procHostCounts
	// pid 1 sits in the root cgroup, as on a real host.
	writeProcess(b, proc, 1, "systemd", "/bin/sleep", kindOther, 12<<20, nil)
	for k := 0; k < n; k++ {
		pid := 10000 + k
		switch k % 25 {
		case 0:
			counts.jvms++
			writeProcess(b, proc, pid, "java", "/usr/lib/jvm/java-17-openjdk-amd64/bin/java", kindJVM, 600<<20, perf[counts.jvms%len(perf)])
		case 1, 2, 3:
			counts.goProcs++
			writeProcess(b, proc, pid, "server", goExe, kindGo, 40<<20, nil)
		default:
			counts.other++
			rss := uint64(8 << 20)
			if k%2 == 0 {
				rss = 200 << 20
				counts.otherLarge++
			}
			writeProcess(b, proc, pid, "sleep", "/bin/sleep", kindOther, rss, nil)
		}
	}
	return counts
}

type procKind int

const (
	kindOther procKind = iota
	kindGo
	kindJVM
)

func must(b testing.TB, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// hsperfFixtures are the captured perf data files of several JDKs and GCs.
func hsperfFixtures(b testing.TB) [][]byte {
	b.Helper()
	dir := filepath.Join("..", "internal", "hsperfdata", "testdata")
	names, _ := filepath.Glob(filepath.Join(dir, "*.hsperf.gz"))
	if len(names) == 0 {
		b.Fatalf("no perf data fixtures in %s", dir)
	}
	var out [][]byte
	for _, name := range names {
		f, err := os.Open(name)
		must(b, err)
		z, err := gzip.NewReader(f)
		must(b, err)
		data, err := io.ReadAll(z)
		must(b, err)
		f.Close()
		out = append(out, data)
	}
	return out
}

// jvmThreadNames are a G1 JVM's threads as task/*/comm shows them.
var jvmThreadNames = []string{"java", "java", "GC Thread#0", "GC Thread#1", "G1 Main Marker", "G1 Conc#0", "G1 Refine#0",
	"G1 Service", "VM Periodic Tas", "VM Thread", "Reference Handl", "Finalizer", "Signal Dispatch", "Service Thread",
	"Monitor Deflati", "C2 CompilerThre", "C1 CompilerThre", "Sweeper thread", "Common-Cleaner", "Notification Th",
	"quota-worker", "pool-1-thread-1", "pool-1-thread-2", "pool-1-thread-3", "pool-1-thread-4", "http-nio-8080-e",
	"http-nio-8080-e", "http-nio-8080-e", "http-nio-8080-A", "Catalina-utilit", "Attach Listener", "process reaper"}

func writeProcess(b testing.TB, proc string, pid int, comm, exe string, kind procKind, rss uint64, perf []byte) {
	b.Helper()
	dir := filepath.Join(proc, strconv.Itoa(pid))
	must(b, os.MkdirAll(filepath.Join(dir, "task"), 0o755))
	must(b, os.Symlink(exe, filepath.Join(dir, "exe")))
	threads := []string{comm}
	switch kind {
	case kindGo:
		threads = []string{comm, comm, comm, comm, comm, comm}
	case kindJVM:
		threads = jvmThreadNames
	}
	for i, name := range threads {
		td := filepath.Join(dir, "task", strconv.Itoa(pid+i*100000))
		must(b, os.MkdirAll(td, 0o755))
		must(b, os.WriteFile(filepath.Join(td, "comm"), []byte(name+"\n"), 0o644))
	}
	nspid := 1 + pid%7 // containerised: the JVM names its perf file by its namespaced pid
	files := map[string]string{
		"comm":    comm + "\n",
		"stat":    procStat(pid, comm, len(threads), rss, startTicks(perf, pid)),
		"status":  procStatusFile(pid, nspid, comm, len(threads), rss),
		"cmdline": strings.Join(procCmdline(kind), "\x00") + "\x00",
		"environ": strings.Join(procEnviron(kind, pid), "\x00") + "\x00",
		"maps":    procMaps(kind, exe),
	}
	for name, content := range files {
		must(b, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	// mem: sparse, zero except the heap headers of the glibc arenas listed in maps.
	f, err := os.Create(filepath.Join(dir, "mem"))
	must(b, err)
	must(b, f.Truncate(1<<47))
	if kind != kindGo {
		for _, h := range arenaHeaps(kind) {
			var hdr [32]byte
			binary.LittleEndian.PutUint64(hdr[0:], h+48) // ar_ptr: malloc_state right after heap_info (glibc >= 2.35)
			binary.LittleEndian.PutUint64(hdr[16:], 0x21000)
			binary.LittleEndian.PutUint64(hdr[24:], 0x21000)
			_, err := f.WriteAt(hdr[:], int64(h))
			must(b, err)
		}
	}
	must(b, f.Close())
	if kind == kindJVM {
		pd := filepath.Join(dir, "root", "tmp", "hsperfdata_root")
		must(b, os.MkdirAll(pd, 0o755))
		must(b, os.WriteFile(filepath.Join(pd, strconv.Itoa(nspid)), perf, 0o600))
		// /tmp of a container holds other files too.
		must(b, os.MkdirAll(filepath.Join(dir, "root", "tmp", "tomcat.8080.123"), 0o755))
		must(b, os.WriteFile(filepath.Join(dir, "root", "tmp", "app.lock"), nil, 0o644))
	}
}

// procStat is a kernel 6.x /proc/<pid>/stat line (52 fields).
// startTicks is a fixture process's start (ticks after procBootTime): for a JVM, half a
// second before the VM start its perf data records, as a launcher takes (the JVM reader
// refuses perf data whose VM did not start with the process).
func startTicks(perf []byte, pid int) uint64 {
	if s, err := hsperfdata.Parse(perf); err == nil {
		if ms, ok := s.Int("sun.rt.createVmBeginTime"); ok && ms/1000 > procBootTime {
			return uint64((ms-procBootTime*1000)/10) - 50
		}
	}
	return uint64(1000 + pid)
}

func procStat(pid int, comm string, threads int, rss uint64, start uint64) string {
	f := make([]string, 50) // fields 3..52
	for i := range f {
		f[i] = "0"
	}
	set := func(field int, v string) { f[field-3] = v }
	set(3, "S")
	set(4, "1")
	set(5, strconv.Itoa(pid))
	set(6, strconv.Itoa(pid))
	set(7, "0")
	set(8, "-1")
	set(9, "4194560")
	set(10, "12345")
	set(14, strconv.Itoa(100+pid%1000)) // utime
	set(15, strconv.Itoa(10+pid%100))   // stime
	set(18, "20")
	set(20, strconv.Itoa(threads))
	set(22, strconv.FormatUint(start, 10)) // starttime, ticks after boot
	set(23, strconv.FormatUint(rss*4, 10))
	set(24, strconv.FormatUint(rss/4096, 10))
	set(25, "18446744073709551615")
	set(38, "17")
	return fmt.Sprintf("%d (%s) %s\n", pid, comm, strings.Join(f, " "))
}

func procStatusFile(pid, nspid int, comm string, threads int, rss uint64) string {
	uid := os.Geteuid() // the perf data file's owner
	kb := rss >> 10
	return fmt.Sprintf(`Name:	%[1]s
Umask:	0022
State:	S (sleeping)
Tgid:	%[2]d
Ngid:	0
Pid:	%[2]d
PPid:	1
TracerPid:	0
Uid:	%[3]d	%[3]d	%[3]d	%[3]d
Gid:	%[3]d	%[3]d	%[3]d	%[3]d
FDSize:	64
Groups:	 
NStgid:	%[2]d	%[4]d
NSpid:	%[2]d	%[4]d
NSpgid:	%[2]d	%[4]d
NSsid:	%[2]d	%[4]d
Kthread:	0
VmPeak:	 %[5]d kB
VmSize:	 %[5]d kB
VmLck:	       0 kB
VmPin:	       0 kB
VmHWM:	 %[6]d kB
VmRSS:	 %[6]d kB
RssAnon:	 %[7]d kB
RssFile:	 %[8]d kB
RssShmem:	       0 kB
VmData:	 %[7]d kB
VmStk:	     132 kB
VmExe:	      20 kB
VmLib:	    1528 kB
VmPTE:	      44 kB
VmSwap:	       0 kB
HugetlbPages:	       0 kB
CoreDumping:	0
THP_enabled:	1
untag_mask:	0xffffffffffffffff
Threads:	%[9]d
SigQ:	1/96365
SigPnd:	0000000000000000
ShdPnd:	0000000000000000
SigBlk:	0000000000000000
SigIgn:	0000000000000000
SigCgt:	0000000000000000
CapInh:	0000000000000000
CapPrm:	000001fffeffffff
CapEff:	000001fffeffffff
CapBnd:	000001fffeffffff
CapAmb:	0000000000000000
NoNewPrivs:	0
Seccomp:	0
Seccomp_filters:	0
Speculation_Store_Bypass:	vulnerable
SpeculationIndirectBranch:	always enabled
Cpus_allowed:	3
Cpus_allowed_list:	0-1
Mems_allowed:	00000000,00000001
Mems_allowed_list:	0
voluntary_ctxt_switches:	150
nonvoluntary_ctxt_switches:	3
`, comm, pid, uid, nspid, kb*4, kb, kb*9/10, kb/10, threads)
}

func procCmdline(kind procKind) []string {
	switch kind {
	case kindJVM:
		return []string{"java", "-Xmx512m", "-XX:+UseG1GC", "-Dspring.profiles.active=prod", "-cp", "/app/classes:/app/lib/*", "com.example.OrderService"}
	case kindGo:
		return []string{"/server", "--listen=:8080", "--config=/etc/server/config.yaml"}
	}
	return []string{"sleep", "infinity"}
}

// procEnviron is a container's environment: a few KiB of Kubernetes service variables.
func procEnviron(kind procKind, pid int) []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=pod-" + strconv.Itoa(pid), "HOME=/root"}
	for i := 0; i < 12; i++ {
		svc := fmt.Sprintf("SERVICE_%02d", i)
		env = append(env, svc+"_SERVICE_HOST=10.96.0."+strconv.Itoa(i+10), svc+"_SERVICE_PORT=8080",
			svc+"_PORT=tcp://10.96.0."+strconv.Itoa(i+10)+":8080")
	}
	switch kind {
	case kindJVM:
		env = append(env, "JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64", "JAVA_TOOL_OPTIONS=-XX:MaxRAMPercentage=75")
	case kindGo:
		if pid%2 == 0 {
			env = append(env, "GOMAXPROCS=4")
		}
		env = append(env, "GODEBUG=madvdontneed=1")
	default:
		env = append(env, "MALLOC_ARENA_MAX=4")
	}
	return env
}

// arenaHeaps are the 64 MiB-aligned addresses of the glibc arena heaps procMaps lists.
func arenaHeaps(kind procKind) []uint64 {
	n := 2
	if kind == kindJVM {
		n = 8
	}
	var out []uint64
	for i := 0; i < n; i++ {
		out = append(out, 0x7f1200000000+uint64(i)*malloc.HeapMaxSize)
	}
	return out
}

// procMaps is /proc/<pid>/maps of a glibc program (executable, [heap], arena heaps, libc,
// ld.so, stack), a JVM (the same plus libjvm, the Java heap, code cache and thread stacks),
// or a static Go binary (no libc).
func procMaps(kind procKind, exe string) string {
	var b strings.Builder
	line := func(start, end uint64, perms string, off uint64, dev string, inode int, path string) {
		// The kernel pads the inode to a column before the path.
		fmt.Fprintf(&b, "%08x-%08x %s %08x %s %-26d %s\n", start, end, perms, off, dev, inode, path)
	}
	anon := func(start, end uint64, perms string) { line(start, end, perms, 0, "00:00", 0, "") }
	if kind == kindGo {
		line(0x400000, 0x1200000, "r-xp", 0, "fe:01", 4242, exe)
		line(0x1200000, 0x2400000, "r--p", 0xe00000, "fe:01", 4242, exe)
		line(0x2400000, 0x2480000, "rw-p", 0x2000000, "fe:01", 4242, exe)
		anon(0x2480000, 0x24c0000, "rw-p")
		anon(0xc000000000, 0xc004000000, "rw-p")
		for i := uint64(0); i < 6; i++ {
			anon(0x7f3000000000+i*0x4000000, 0x7f3000000000+i*0x4000000+0x400000, "rw-p")
		}
		anon(0x7ffd00000000, 0x7ffd00021000, "rw-p")
		return b.String()
	}
	base := uint64(0x55d4c0a00000)
	line(base, base+0x2000, "r--p", 0, "fe:01", 1234, exe)
	line(base+0x2000, base+0x6000, "r-xp", 0x2000, "fe:01", 1234, exe)
	line(base+0x6000, base+0x8000, "r--p", 0x6000, "fe:01", 1234, exe)
	line(base+0x8000, base+0x9000, "rw-p", 0x7000, "fe:01", 1234, exe)
	anon(base+0x1000000, base+0x1021000, "rw-p") // [heap] shown without name for simplicity
	if kind == kindJVM {
		anon(0xe0000000, 0x100000000, "rw-p") // Java heap, 512 MiB
		anon(0x800000000, 0x840000000, "---p")
		for i := uint64(0); i < 40; i++ { // thread stacks with guard pages
			s := 0x7f0000000000 + i*0x100000
			anon(s, s+0x4000, "---p")
			anon(s+0x4000, s+0x100000, "rw-p")
		}
		line(0x7f1100000000, 0x7f1100c00000, "r-xp", 0, "fe:01", 9999, "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so")
		line(0x7f1100c00000, 0x7f1100d00000, "rw-p", 0xc00000, "fe:01", 9999, "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so")
		for _, lib := range []string{"libjava.so", "libzip.so", "libnio.so", "libnet.so", "libjimage.so", "libverify.so"} {
			line(0x7f1180000000, 0x7f1180020000, "r-xp", 0, "fe:01", 9000, "/usr/lib/jvm/java-17-openjdk-amd64/lib/"+lib)
		}
	}
	for _, h := range arenaHeaps(kind) {
		anon(h, h+0x21000, "rw-p")
		anon(h+0x21000, h+malloc.HeapMaxSize, "---p")
	}
	libc := uint64(0x7f123c600000)
	for i, perms := range []string{"r--p", "r-xp", "r--p", "r--p", "rw-p"} {
		line(libc+uint64(i)*0x28000, libc+uint64(i+1)*0x28000, perms, uint64(i)*0x28000, "fe:01", 5678, "/usr/lib/x86_64-linux-gnu/libc.so.6")
	}
	anon(libc+5*0x28000, libc+5*0x28000+0xd000, "rw-p")
	for i, perms := range []string{"r--p", "r-xp", "r--p", "r--p", "rw-p"} {
		line(0x7f123c800000+uint64(i)*0x8000, 0x7f123c800000+uint64(i+1)*0x8000, perms, uint64(i)*0x8000, "fe:01", 5679, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
	}
	anon(0x7ffd00000000, 0x7ffd00021000, "rw-p")
	line(0x7ffd001fe000, 0x7ffd00202000, "r--p", 0, "00:00", 0, "[vvar]")
	line(0x7ffd00202000, 0x7ffd00204000, "r-xp", 0, "00:00", 0, "[vdso]")
	return b.String()
}

// newScrape makes the next Gather walk the hierarchies and list the processes again, once,
// shared by the scrape's collectors: what a scrape every 15 s does with discoveryMaxAge.
func newScrape(env *Env) {
	env.Cgroups.Expire()
	env.Processes.Expire()
}

// releaseEnv is a no-op kept for the benchmarks' shape: an Env's state lives on the Env
// and goes with it.
func releaseEnv(env *Env) {}

// collectorSet builds the named collectors and a registry that gathers them.
func collectorSet(b testing.TB, env *Env, names []string) (*prometheus.Registry, *Set) {
	b.Helper()
	s := &Set{env: env, collectors: map[string]Collector{}}
	for _, n := range names {
		c, err := registry[n].factory(env)
		if err != nil {
			b.Fatal(err)
		}
		s.collectors[n] = c
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Bind(context.Background()), env.Errors)
	return reg, s
}

func gatherCount(b testing.TB, reg *prometheus.Registry) (series int, families map[string]int) {
	b.Helper()
	families = map[string]int{}
	for name, mf := range testutil.Families(b, reg) {
		families[name] = len(mf.Metric)
		series += len(mf.Metric)
	}
	return series, families
}

// BenchmarkScrapeProcesses is one scrape of the process, go, jvm and malloc collectors with
// discovery over 500 fixture processes in 100 containers. The process source caches runtime
// detection per (pid, start time) and the malloc layout for 30 s, the Go build info for 30 s:
//
//   - cold: the first scrape of a new exporter (every process detected, every layout read);
//   - steady: later scrapes (one walk and one listing per scrape, shared by the collectors,
//     as in production);
//   - steady-walk-per-collector: discovery cache off (maxAge 0), so each of the four
//     collectors walks and lists on its own: what a scrape would cost without the sharing.
func BenchmarkScrapeProcesses(b *testing.B) {
	const n = 500
	root := memTempDir(b)
	counts := processHost(b, root, n)
	cfg := Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys"),
		ThrottleWindow: time.Second, ProcessMinResident: 64 << 20}
	newEnv := func() *Env {
		env, err := NewEnv(cfg, discardLogger())
		if err != nil {
			b.Fatal(err)
		}
		return env
	}
	// The fixture must take the collectors' real paths: check once what a scrape exports.
	{
		env := newEnv()
		reg, _ := collectorSet(b, env, processCollectors)
		_, fam := gatherCount(b, reg)
		want := map[string]int{
			"quota_process_info":           counts.otherLarge + counts.goProcs + counts.jvms,
			"quota_go_gomaxprocs":          counts.goProcs,
			"quota_jvm_perfdata_available": counts.jvms,
			"quota_jvm_safepoints_total":   counts.jvms, // perf data read, not stale
			"quota_process_malloc_arenas":  counts.otherLarge + counts.jvms,
		}
		for name, w := range want {
			if fam[name] != w {
				b.Fatalf("fixture scrape: %d series of %s, want %d (families: %v)", fam[name], name, w, fam)
			}
		}
		releaseEnv(env)
	}
	report := func(b *testing.B, reg *prometheus.Registry) {
		series, _ := gatherCount(b, reg)
		b.ReportMetric(float64(series), "series")
		b.ReportMetric(n, "processes")
	}

	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		var reg *prometheus.Registry
		var cpu time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			env := newEnv()
			reg, _ = collectorSet(b, env, processCollectors)
			b.StartTimer()
			c0 := cpuTime()
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
			cpu += cpuTime() - c0
			b.StopTimer()
			releaseEnv(env)
			b.StartTimer()
		}
		b.StopTimer()
		reportCPU(b, cpu)
		report(b, reg)
	})
	b.Run("steady", func(b *testing.B) {
		env := newEnv()
		defer releaseEnv(env)
		reg, _ := collectorSet(b, env, processCollectors)
		gatherCount(b, reg) // detection, layouts
		measureGather(b, env, reg)
		report(b, reg)
	})
	b.Run("steady-walk-per-collector", func(b *testing.B) {
		env := newEnv()
		defer releaseEnv(env)
		env.Cgroups.MaxAge, env.Processes.MaxAge = 0, 0
		reg, _ := collectorSet(b, env, processCollectors)
		gatherCount(b, reg)
		measureGather(b, nil, reg)
	})
}

// allCollectors is every registered collector, as the exporter runs by default.
var allCollectors = []string{"cpu", "memory", "throttle", "process", "go", "jvm", "malloc", "smaps"}

// BenchmarkScrapeRealJVMs is the wall time of one whole scrape, every collector, of this host
// while 4 real JDK 17 JVMs (QuotaBusy, allocating) run, each in its own v1 cgroup with a
// 1-core quota. Root, v1 cgroups and a JDK: skips locally without them, fails on CI.
// The host's other processes and cgroups are scraped too: the figure is this host's.
func BenchmarkScrapeRealJVMs(b *testing.B) {
	java := testutil.LookPath(b, "java")
	javac := testutil.LookPath(b, "javac")
	testutil.RequireV1Cgroups(b)
	classes := b.TempDir()
	if out, err := exec.Command(javac, "-d", classes, filepath.Join("..", "internal", "jvm", "testdata", "QuotaBusy.java")).CombinedOutput(); err != nil {
		b.Fatalf("javac: %v\n%s", err, out)
	}
	var cgs []*testutil.Cgroup
	var pids []int
	for i := 0; i < 4; i++ {
		cg := testutil.NewCgroup(b, fmt.Sprintf("benchjvm%d", i), testutil.CgroupOptions{QuotaUS: 100000, PeriodUS: 100000})
		cmd := cg.Command(java, "-Xmx128m", "-cp", classes, "QuotaBusy")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		cgs = append(cgs, cg)
		pids = append(pids, cmd.Process.Pid) // sh execs java: same pid
	}
	newEnv := func() *Env {
		env, err := NewEnv(Config{ProcPath: "/proc", SysPath: "/sys", ThrottleWindow: time.Second,
			ProcessMinResident: 64 << 20, SmapsInterval: 5 * time.Minute}, discardLogger())
		if err != nil {
			b.Fatal(err)
		}
		return env
	}
	// Wait until every JVM's perf data is readable.
	deadline := time.Now().Add(60 * time.Second)
	for {
		env := newEnv()
		reg, set := collectorSet(b, env, []string{"process", "jvm"})
		mfs, err := reg.Gather()
		set.Close()
		releaseEnv(env)
		if err != nil {
			b.Fatal(err)
		}
		ready := 0
		for _, mf := range mfs {
			if mf.GetName() != "quota_jvm_perfdata_available" {
				continue
			}
			for _, m := range mf.Metric {
				for _, l := range m.Label {
					for _, cg := range cgs {
						if l.GetName() == "cgroup" && l.GetValue() == cg.Path && m.GetGauge().GetValue() == 1 {
							ready++
						}
					}
				}
			}
		}
		if ready == len(cgs) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("perf data of %d of %d JVMs readable after 60 s", ready, len(cgs))
		}
		time.Sleep(300 * time.Millisecond)
	}

	report := func(b *testing.B, reg *prometheus.Registry) {
		series, fam := gatherCount(b, reg)
		b.ReportMetric(float64(series), "series")
		b.ReportMetric(float64(fam["quota_process_info"]), "processes")
		b.ReportMetric(float64(fam["quota_jvm_info"]), "jvms")
	}
	b.Run("cold", func(b *testing.B) {
		var reg *prometheus.Registry
		var cpu time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			env := newEnv()
			var set *Set
			reg, set = collectorSet(b, env, allCollectors)
			b.StartTimer()
			c0 := cpuTime()
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
			cpu += cpuTime() - c0
			b.StopTimer()
			if i == b.N-1 {
				newScrape(env)
				report(b, reg)
			}
			set.Close()
			releaseEnv(env)
			b.StartTimer()
		}
		b.StopTimer()
		reportCPU(b, cpu)
	})
	b.Run("steady", func(b *testing.B) {
		env := newEnv()
		defer releaseEnv(env)
		reg, set := collectorSet(b, env, allCollectors)
		defer set.Close()
		gatherCount(b, reg)
		measureGather(b, env, reg)
		newScrape(env)
		report(b, reg)
	})
	// What the malloc collector pays per JVM and refresh (every 30 s): maps, environ, the
	// executable's symbols, task names and the heap headers through the real /proc/<pid>/mem.
	b.Run("malloc-inspect", func(b *testing.B) {
		b.ReportAllocs()
		var st *malloc.State
		for i := 0; i < b.N; i++ {
			var err error
			st, err = malloc.Inspect(context.Background(), "/proc", pids[i%len(pids)])
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(st.Heaps), "heaps")
		if st.Method != malloc.MethodHeaders {
			b.Errorf("malloc method %q, want headers (/proc/<pid>/mem readable as root)", st.Method)
		}
	})
}
