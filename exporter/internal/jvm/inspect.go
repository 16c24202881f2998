package jvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/hsperfdata"
	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procenv"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// ErrNotJVM is returned by Inspect for a process that is not a HotSpot JVM.
var ErrNotJVM = errors.New("not a JVM")

// Info is what Inspect learns about one JVM.
type Info struct {
	PID, NSPid int
	// StartTicks is field 22 of /proc/<pid>/stat: with PID it identifies the process.
	StartTicks uint64
	// Main is the main class or jar base name (never arguments).
	Main    string
	Version Version
	VMName  string
	GC      GC
	// GCSource is "flag", "perfdata" or "default".
	GCSource  string
	Flags     Flags
	CPUCount  int
	CPUSource CPUSource
	// Configured are the pool sizes HotSpot derived from CPUCount (not live threads).
	Configured Threads
	// Threads counts live threads by kind from /proc/<pid>/task/*/comm.
	Threads ThreadCounts
	// PerfData is nil when Unavailable is set; it holds the entry layout only (the values
	// read are in Counters and the fields above).
	PerfData    *hsperfdata.Snapshot
	Counters    *Counters
	Unavailable *UnavailableError
}

// PerfDataAvailable reports whether counters were read.
func (i *Info) PerfDataAvailable() bool { return i.PerfData != nil }

// Inspector inspects JVMs and caches, per (pid, start time), what does not change while a JVM
// runs (flags, main class, version) and the perf data layout, so a scrape re-reads one 32 KiB
// file and a handful of /proc files. Safe for concurrent use.
type Inspector struct {
	Procfs string

	mu       sync.Mutex
	cache    map[cacheKey]*cached
	bootTime float64 // /proc/stat btime, read once when the caller gives no start time
}

type cacheKey struct {
	pid   int
	start uint64
}

type cached struct {
	// snap is the last perf data's entry layout (no values: see Snapshot.WithoutData), and
	// perfName its file's name inside the process's root, tried first on the next read.
	snap     *hsperfdata.Snapshot
	perfName string
	main     string
	// flags and version from perf data are final; from the cmdline they are kept until perf
	// data shows up.
	fromPerf bool
	flags    Flags
	version  Version
	vmName   string
	// Thread kinds are re-counted (one comm read per thread) only when the thread count
	// changes or threadRecount has passed: a JVM may have hundreds of threads.
	threads   ThreadCounts
	threadsN  int
	threadsAt time.Time
	// missed is why the last look found no usable perf data, missedAt when: the next look is
	// due missWait later (see remember).
	missed   *UnavailableError
	missedAt time.Time
	missWait time.Duration
}

// A JVM without usable perf data cost a listing of its /tmp (up to procroot.MaxDirEntries
// lookups) and a read of its /etc/passwd at every scrape. The miss is remembered per process
// and looked at again after missRetryFirst, then twice as long each time up to missRetryLongest: a
// JVM that is starting (its file appears within a second or two) is found at the first
// scrape after missRetryFirst, one that never has a file costs a look every few minutes.
const (
	missRetryFirst   = 5 * time.Second
	missRetryLongest = 5 * time.Minute
)

// remember records a look that found no usable perf data.
func (c *cached) remember(ue *UnavailableError) {
	c.missWait = min(max(2*c.missWait, missRetryFirst), missRetryLongest)
	if ue.Reason == ReasonNotReady {
		c.missWait = missRetryFirst // the VM is initialising its counters: soon
	}
	c.missed, c.missedAt = ue, time.Now()
}

// parsePerfData parses a perf data file's bytes b (reusing the layout of last, the file's
// previous parse) and checks that it is ready and the process's own; the refusals are
// *UnavailableError. Only the entries the exporter reads are kept (WantedCounter).
func (in *Inspector) parsePerfData(last *hsperfdata.Snapshot, b []byte, p Process) (*hsperfdata.Snapshot, error) {
	if len(b) == 0 {
		return nil, &UnavailableError{Reason: ReasonEmpty, Err: errEmptyFile}
	}
	var snap *hsperfdata.Snapshot
	var err error
	if last != nil {
		snap, err = last.Reparse(b)
	} else {
		snap, err = hsperfdata.ParseWanted(b, WantedCounter)
	}
	switch {
	case err != nil:
		return nil, &UnavailableError{Reason: ReasonInvalid, Err: err}
	case !snap.Header.Accessible:
		return nil, &UnavailableError{Reason: ReasonNotReady}
	}
	if r, why := in.owner(snap, p); r != "" {
		return nil, &UnavailableError{Reason: r, Err: why}
	}
	return snap, nil
}

// threadRecount bounds how stale cached thread kinds may get while the count is unchanged
// (a thread may exit and another start between two scrapes).
const threadRecount = 30 * time.Second

// Forget drops cached state of processes not in alive (call after each scrape).
func (in *Inspector) Forget(alive func(pid int) bool) {
	in.Evict(func(pid int, _ uint64) bool { return alive(pid) })
}

// Evict drops cached state of processes, identified by pid and start ticks, that keep
// rejects: exited ones, or one that exec'd into another program (same pid and start time).
func (in *Inspector) Evict(keep func(pid int, startTicks uint64) bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for k := range in.cache {
		if !keep(k.pid, k.start) {
			delete(in.cache, k)
		}
	}
}

// Len is the number of processes with cached state.
func (in *Inspector) Len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.cache)
}

// Process is what process discovery already read about a process (/proc/<pid>/stat, status
// and the exe link), handed to InspectProcess so that the reader does not read them again.
type Process struct {
	PID, NSPid, UID int
	// Affinity is the CPU count of Cpus_allowed_list, Threads the Threads: line.
	Affinity, Threads int
	// StartTicks is field 22 of /proc/<pid>/stat: with PID it identifies the process.
	StartTicks uint64
	// Comm is the command name; Exe the exe link's target, "" when it could not be read.
	Comm, Exe string
	// StartTime is the start in seconds since the epoch; 0 when unknown (then Inspect reads
	// the boot time itself).
	StartTime float64
	// ThreadNames returns the names of the process's threads, read once and shared with
	// other readers; nil makes the reader read task/*/comm itself.
	ThreadNames func() ([]string, error)
}

// IsJVM tells a HotSpot JVM by its executable's name, or by its comm when the exe link
// cannot be read (another user's process without CAP_SYS_PTRACE). Custom launchers embedding
// libjvm.so are not detected: finding them needs /proc/<pid>/maps, which takes the target's
// mmap lock on every scrape.
func (p Process) IsJVM() bool {
	return filepath.Base(strings.TrimSuffix(p.Exe, " (deleted)")) == "java" || p.Comm == "java"
}

// Inspect gathers Info for one pid, reading its stat, status and exe link first; see
// InspectProcess.
func (in *Inspector) Inspect(ctx context.Context, pid int, cg CgroupCPU) (*Info, error) {
	procfs := in.procfs()
	st, err := readStatus(ctx, procfs, pid)
	if err != nil {
		return nil, err
	}
	p := Process{PID: pid, NSPid: st.NSPid, UID: st.UID, Affinity: st.Affinity, Threads: st.Threads}
	if p.Exe, p.Comm, err = readExeComm(ctx, procfs, pid); err != nil {
		return nil, err
	}
	if !p.IsJVM() {
		return nil, ErrNotJVM
	}
	if p.StartTicks, err = readStartTicks(ctx, procfs, pid); err != nil {
		return nil, err
	}
	return in.InspectProcess(ctx, p, cg)
}

func (in *Inspector) procfs() string {
	if in.Procfs == "" {
		return "/proc"
	}
	return in.Procfs
}

// InspectProcess gathers Info for a process whose stat and status were read by the caller.
// Errors wrap os.ErrNotExist when the process vanished and os.ErrPermission when its /proc
// files cannot be read; ErrNotJVM when it is no JVM. Absent perf data is not an error:
// Info.Unavailable says why.
func (in *Inspector) InspectProcess(ctx context.Context, p Process, cg CgroupCPU) (*Info, error) {
	if !p.IsJVM() {
		return nil, ErrNotJVM
	}
	procfs := in.procfs()
	pid, start, exe := p.PID, p.StartTicks, strings.TrimSuffix(p.Exe, " (deleted)")
	st := procStatus{NSPid: p.NSPid, UID: p.UID, Affinity: p.Affinity, Threads: p.Threads}
	info := &Info{PID: pid, NSPid: st.NSPid, StartTicks: start}
	key := cacheKey{pid, start}
	in.mu.Lock()
	c := &cached{}
	if old := in.cache[key]; old != nil {
		*c = *old // copied under the lock, which also guards the thread-count update below
	}
	in.mu.Unlock()

	// Perf data first: it carries flags from JAVA_TOOL_OPTIONS that the cmdline lacks. A miss
	// is remembered (missed): until its retry is due, nothing is looked up in the process's
	// root again.
	var ue *UnavailableError
	remembered := c.missed != nil && time.Since(c.missedAt) < c.missWait
	if remembered {
		ue = c.missed
	} else {
		name, b, err := readPerfData(ctx, procfs, pid, st, c.perfName)
		if err == nil {
			var snap *hsperfdata.Snapshot
			snap, err = in.parsePerfData(c.snap, b, p)
			if err == nil {
				info.PerfData = snap
				c.snap = snap.WithoutData() // the layout serves the next Reparse; values are not kept
				c.perfName = name
			}
		}
		if err != nil && !errors.As(err, &ue) {
			return nil, err // the process vanished or procread timed out
		}
	}

	if info.PerfData != nil && !c.fromPerf {
		s := info.PerfData
		c.fromPerf = true
		args, _ := s.String("java.rt.vmArgs")
		c.flags = ParseVMArgs(args)
		cmd, _ := s.String("sun.rt.javaCommand")
		c.main = tenantstr.Keep(MainFromJavaCommand(cmd))
		vm, _ := s.String("java.property.java.vm.name")
		c.vmName = tenantstr.Keep(vm)
		if v, ok := s.String("java.property.java.version"); ok {
			c.version, _ = ParseVersion(v)
		}
		if !c.version.Known() {
			if v, ok := s.Int("sun.rt.jvmVersion"); ok {
				c.version, _ = VersionFromPerfData(v)
			}
		}
	} else if info.PerfData == nil && !c.fromPerf && c.flags == (Flags{}) {
		var main string
		c.flags, main = flagsFromProc(ctx, procfs, pid)
		c.main = tenantstr.Keep(main)
		c.version = versionFromRelease(ctx, procfs, pid, exe)
	}
	if ue != nil && !remembered {
		if ue.Reason == ReasonNotFound {
			if c.flags.PerfDataDisabled() {
				ue.Reason = ReasonDisabled
			} else if has, ok := hasPasswdEntry(ctx, procfs, pid, st.UID); ok && !has {
				ue.Reason = ReasonNoUser
			}
		}
		c.remember(ue)
	} else if ue == nil {
		c.missed, c.missWait = nil, 0
	}
	in.mu.Lock()
	if in.cache == nil {
		in.cache = map[cacheKey]*cached{}
	}
	in.cache[key] = c
	in.mu.Unlock()

	info.Main, info.Flags, info.Version, info.VMName = c.main, c.flags, c.version, c.vmName
	info.Unavailable = ue
	if info.PerfData != nil {
		cn := ReadCounters(info.PerfData)
		info.Counters = &cn
		// Everything used is in Counters and the fields above: do not keep the file's bytes
		// (up to hsperfdata.MaxFileSize per JVM) in what callers hold on to.
		info.PerfData = info.PerfData.WithoutData()
	}

	if cg.Affinity <= 0 {
		cg.Affinity = st.Affinity
	}
	cg = cg.SeenBy(info.Version)
	info.CPUCount, info.CPUSource = CPUCount(info.Version, info.Flags, cg)
	info.GC, info.GCSource = info.Flags.GC, "flag"
	if info.GC == GCZ && (info.Flags.ZGenerational == On || info.Version.Feature >= 24) {
		info.GC = GCZGenerational // JDK 23 made it the default, 24 the only mode
	}
	if info.GC == GCZ && info.Counters != nil {
		if g := GCFromCollectors(info.Counters.CollectorNames); g == GCZGenerational {
			info.GC = g
		}
	}
	if info.GC == GCUnknown && info.Counters != nil {
		info.GC, info.GCSource = GCFromCollectors(info.Counters.CollectorNames), "perfdata"
	}
	if info.GC == GCUnknown {
		info.GC, info.GCSource = DefaultGC(info.CPUCount, cg.MemoryLimitBytes), "default"
	}
	maxHeap := info.Flags.MaxHeapBytes
	if maxHeap <= 0 && info.Counters != nil {
		maxHeap = info.Counters.HeapMaxBytes
	}
	if maxHeap <= 0 && cg.MemoryLimitBytes > 0 {
		maxHeap = cg.MemoryLimitBytes / 4 // MaxRAMPercentage=25
	}
	info.Configured = ConfiguredThreads(info.Version, info.GC, info.CPUCount, info.Flags, maxHeap)

	if c.threads != nil && c.threadsN == st.Threads && time.Since(c.threadsAt) < threadRecount {
		info.Threads = c.threads
		return info, nil
	}
	names := p.ThreadNames
	if names == nil {
		names = func() ([]string, error) { return ThreadNames(ctx, procfs, pid) }
	}
	tn, err := names()
	if err != nil {
		return nil, vanished(err)
	}
	info.Threads = ClassifyThreads(tn)
	in.mu.Lock()
	c.threads, c.threadsN, c.threadsAt = info.Threads, st.Threads, time.Now()
	in.mu.Unlock()
	return info, nil
}

// readExeComm reads the exe link (empty when unreadable) and, unless it names java, the comm.
func readExeComm(ctx context.Context, procfs string, pid int) (exe, comm string, err error) {
	base := filepath.Join(procfs, strconv.Itoa(pid))
	exe, err = procread.Do(ctx, func() (string, error) { return os.Readlink(filepath.Join(base, "exe")) })
	if err == nil && (Process{Exe: exe}).IsJVM() {
		return exe, "", nil
	}
	exe = ""
	b, err := procread.ReadFile(ctx, filepath.Join(base, "comm"), 64)
	if err != nil {
		return "", "", vanished(err)
	}
	return exe, string(bytes.TrimSpace(b)), nil
}

// readStartTicks reads the start time (field 22) of /proc/<pid>/stat.
func readStartTicks(ctx context.Context, procfs string, pid int) (uint64, error) {
	b, err := procread.ReadFile(ctx, filepath.Join(procfs, strconv.Itoa(pid), "stat"), 4096)
	if err != nil {
		return 0, vanished(err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat of %d: no comm", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("stat of %d: %d fields", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22, counted from field 3 after comm
}

const maxCmdline = 256 << 10

// maxArgs caps the arguments of a command line that are split apart: the JVM options and the
// main class come first, and a hostile command line of 256 KiB of empty arguments would
// otherwise cost a string header each (4 MiB).
const maxArgs = 1024

// flagsFromProc parses flags from the environment variables the JVM reads and the cmdline, in
// HotSpot's order (JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS, command line, _JAVA_OPTIONS), when
// there is no perf data. Unreadable environ (no ptrace access) is skipped.
func flagsFromProc(ctx context.Context, procfs string, pid int) (Flags, string) {
	f := NoFlags()
	env, _ := procenv.Lookup(ctx, procfs, pid, "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")
	f.Apply(strings.FieldsSeq(env["JAVA_TOOL_OPTIONS"]))
	f.Apply(strings.FieldsSeq(env["JDK_JAVA_OPTIONS"]))
	var main string
	if b, err := procread.ReadFile(ctx, filepath.Join(procfs, strconv.Itoa(pid), "cmdline"), maxCmdline); err == nil {
		argv := strings.SplitN(strings.TrimRight(string(b), "\x00"), "\x00", maxArgs)
		if len(argv) > 1 {
			var opts []string
			opts, main = ParseCmdline(argv[1:])
			f.Apply(slices.Values(opts))
		}
	}
	f.Apply(strings.FieldsSeq(env["_JAVA_OPTIONS"]))
	return f, main
}

// versionFromRelease reads JAVA_VERSION from the release file next to the java binary
// (<java.home>/release), resolved inside the process's root.
func versionFromRelease(ctx context.Context, procfs string, pid int, exe string) Version {
	if exe == "" {
		return Version{}
	}
	b, err := readInRoot(ctx, procfs, pid, filepath.Join(filepath.Dir(filepath.Dir(exe)), "release"), maxRelease)
	if err != nil {
		return Version{}
	}
	return releaseVersion(b)
}

// releaseVersion parses JAVA_VERSION out of a JDK release file's text.
func releaseVersion(b []byte) Version {
	for line := range kernel.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("JAVA_VERSION=")); ok {
			ver, _ := ParseVersion(strings.Trim(string(v), `"`))
			return ver
		}
	}
	return Version{}
}

// maxRelease caps the release file (about 1 KiB in every JDK).
const maxRelease = 64 << 10

// The VM start time in a perf data file (sun.rt.createVmBeginTime, wall clock ms, stamped by
// the launcher's main thread before the VM loads a class) must fall in
// [process start - perfStartBefore, process start + 1 s + perfStartAfter], the process start
// being /proc/<pid>/stat's start ticks on the boot time (btime, whole seconds: up to 1 s
// early). A file from before the process (a JVM killed with SIGKILL earlier under this pid,
// another JVM's file copied or linked into a shared /tmp) is stale; one from a VM that began
// long after the process did is another process's.
const (
	// perfStartBefore absorbs clock steps between the process start and the VM start; a VM
	// cannot begin before its process.
	perfStartBefore = 2 * time.Second
	// perfStartAfter is the launcher's time to reach the VM: 0.46-0.54 s measured for JDK 17
	// on a loaded 2-core host (process start from btime, so up to 1 s more than the truth);
	// seconds on a loaded node or behind a wrapper that forks, then execs java.
	perfStartAfter = 60 * time.Second
)

// owner checks that snap's VM started with process p; it returns "" or the reason (stale,
// foreign, no_start_time) and why. A file without the counter is refused: its owner cannot
// be told (every HotSpot since JDK 1.4 writes it; a file without it is made up).
func (in *Inspector) owner(snap *hsperfdata.Snapshot, p Process) (Reason, error) {
	ms, ok := snap.Int("sun.rt.createVmBeginTime")
	if !ok || ms <= 0 {
		return ReasonNoStartTime, errNoStartTime
	}
	procStart := p.StartTime
	if procStart <= 0 {
		in.mu.Lock()
		if in.bootTime == 0 {
			in.bootTime, _ = kernel.BootTime(in.procfs())
		}
		bt := in.bootTime
		in.mu.Unlock()
		if bt == 0 {
			return "", nil
		}
		procStart = bt + float64(p.StartTicks)/kernel.UserHZ
	}
	vm := float64(ms) / 1e3
	switch {
	case vm < procStart-perfStartBefore.Seconds():
		return ReasonStale, fmt.Errorf("its VM began %.1f s before the process started", procStart-vm)
	case vm > procStart+1+perfStartAfter.Seconds():
		return ReasonForeign, fmt.Errorf("its VM began %.1f s after the process started", vm-procStart)
	}
	return "", nil
}
