// Package jvm reads, from outside and with no attach, what the exporter needs to put a HotSpot
// JVM next to its CPU quota: which CPU count the JVM sized itself for, the GC and JIT thread
// counts that follow from it, how its threads split into gc/jit/vm/app, and the stop-the-world
// counters from its perf data (hsperfdata).
//
// Command lines and JVM argument strings can hold secrets (-Dpassword=...): this package parses
// the few flags it needs out of them and never returns, keeps or logs the strings.
package jvm

import (
	"iter"
	"strconv"
	"strings"
)

// Tri is a boolean flag that may not have been given.
type Tri int8

// Tri values.
const (
	Unset Tri = iota
	On
	Off
)

// Is reports the flag's value, or def when it was not given.
func (t Tri) Is(def bool) bool {
	switch t {
	case On:
		return true
	case Off:
		return false
	}
	return def
}

// GC is a HotSpot collector.
type GC string

// Collectors. GCUnknown means no flag selected one.
const (
	GCUnknown       GC = ""
	GCG1            GC = "g1"
	GCParallel      GC = "parallel"
	GCSerial        GC = "serial"
	GCCMS           GC = "cms"
	GCZ             GC = "zgc"
	GCZGenerational GC = "zgc-generational"
	GCShenandoah    GC = "shenandoah"
	GCEpsilon       GC = "epsilon"
)

// Flags are the few JVM options the exporter needs. Int options are -1 when not given.
type Flags struct {
	ActiveProcessorCount            int
	UseContainerSupport             Tri
	PreferContainerQuotaForCPUCount Tri
	ParallelGCThreads               int
	ConcGCThreads                   int
	CICompilerCount                 int
	TieredCompilation               Tri
	// GC is the collector selected with -XX:+Use...GC (last one given wins, as in HotSpot
	// when only one is given; several at once make HotSpot refuse to start).
	GC            GC
	ZGenerational Tri
	UsePerfData   Tri
	// PerfDisableSharedMem keeps the counters in private memory: no file.
	PerfDisableSharedMem Tri
	// MaxHeapBytes is -Xmx / -XX:MaxHeapSize, -1 when not given (ZGC caps its workers by it).
	MaxHeapBytes int64
}

// NoFlags is the zero state: nothing given.
func NoFlags() Flags {
	return Flags{ActiveProcessorCount: -1, ParallelGCThreads: -1, ConcGCThreads: -1, CICompilerCount: -1, MaxHeapBytes: -1}
}

// PerfDataDisabled reports whether the flags stop the JVM from creating its perf data file.
func (f Flags) PerfDataDisabled() bool {
	return !f.UsePerfData.Is(true) || f.PerfDisableSharedMem.Is(false)
}

// ParseVMArgs parses a space-separated JVM argument string such as perf data's java.rt.vmArgs
// or JAVA_TOOL_OPTIONS. Arguments with embedded spaces are mis-split, which cannot affect the
// flags parsed here (none takes a value with spaces).
func ParseVMArgs(s string) Flags {
	f := NoFlags()
	f.Apply(strings.FieldsSeq(s))
	return f
}

// Apply parses args in order on top of f; a later occurrence wins, as in HotSpot.
// Unknown arguments are ignored. @argfiles and -XX:Flags= files are not followed.
func (f *Flags) Apply(args iter.Seq[string]) {
	for a := range args {
		switch {
		case strings.HasPrefix(a, "-Xmx"):
			if n, ok := parseSize(a[4:]); ok {
				f.MaxHeapBytes = n
			}
		case strings.HasPrefix(a, "-XX:+"), strings.HasPrefix(a, "-XX:-"):
			v := On
			if a[4] == '-' {
				v = Off
			}
			f.setBool(a[5:], v)
		case strings.HasPrefix(a, "-XX:"):
			name, val, ok := strings.Cut(a[4:], "=")
			if ok {
				f.setValue(name, val)
			}
		}
	}
}

var gcFlags = map[string]GC{
	"UseG1GC": GCG1, "UseParallelGC": GCParallel, "UseParallelOldGC": GCParallel, "UseSerialGC": GCSerial,
	"UseConcMarkSweepGC": GCCMS, "UseZGC": GCZ, "UseShenandoahGC": GCShenandoah, "UseEpsilonGC": GCEpsilon,
}

func (f *Flags) setBool(name string, v Tri) {
	if gc, ok := gcFlags[name]; ok {
		if v == On {
			f.GC = gc
		} else if f.GC == gc {
			f.GC = GCUnknown
		}
		return
	}
	switch name {
	case "UseContainerSupport":
		f.UseContainerSupport = v
	case "PreferContainerQuotaForCPUCount":
		f.PreferContainerQuotaForCPUCount = v
	case "TieredCompilation":
		f.TieredCompilation = v
	case "ZGenerational":
		f.ZGenerational = v
	case "UsePerfData":
		f.UsePerfData = v
	case "PerfDisableSharedMem":
		f.PerfDisableSharedMem = v
	}
}

func (f *Flags) setValue(name, val string) {
	var dst *int
	switch name {
	case "ActiveProcessorCount":
		dst = &f.ActiveProcessorCount
	case "ParallelGCThreads":
		dst = &f.ParallelGCThreads
	case "ConcGCThreads":
		dst = &f.ConcGCThreads
	case "CICompilerCount":
		dst = &f.CICompilerCount
	case "MaxHeapSize":
		if n, ok := parseSize(val); ok {
			f.MaxHeapBytes = n
		}
		return
	default:
		return
	}
	if n, err := strconv.Atoi(val); err == nil && n >= -1 && n < 1<<20 {
		*dst = n
	}
}

// parseSize parses HotSpot sizes: digits with an optional k/m/g/t suffix (either case).
func parseSize(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'k', 'K':
		mult = 1 << 10
	case 'm', 'M':
		mult = 1 << 20
	case 'g', 'G':
		mult = 1 << 30
	case 't', 'T':
		mult = 1 << 40
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, false
	}
	return n * mult, true
}

// launcherOptsWithValue are java launcher options whose value is the next argument.
var launcherOptsWithValue = map[string]bool{
	"-cp": true, "-classpath": true, "--class-path": true, "-p": true, "--module-path": true,
	"--upgrade-module-path": true, "--add-modules": true, "--limit-modules": true, "--add-reads": true,
	"--add-exports": true, "--add-opens": true, "--patch-module": true, "--source": true,
	"--enable-native-access": true, "--describe-module": true, "-d": true,
}

// maxNameLen caps the kept main class / jar name.
const maxNameLen = 128

// ParseCmdline splits a java launcher command line (argv, without the program) into the JVM
// options and the main class or jar base name. Program arguments after the main class are
// dropped unread. `-jar /app/x.jar` gives "x"; `-m mod/pkg.Main` gives "pkg.Main".
func ParseCmdline(argv []string) (vmOpts []string, main string) {
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-jar":
			if i+1 < len(argv) {
				return vmOpts, jarName(argv[i+1])
			}
			return vmOpts, ""
		case a == "-m" || a == "--module":
			if i+1 < len(argv) {
				return vmOpts, moduleMain(argv[i+1])
			}
			return vmOpts, ""
		case strings.HasPrefix(a, "--module="):
			return vmOpts, moduleMain(a[len("--module="):])
		case launcherOptsWithValue[a]:
			i++
		case strings.HasPrefix(a, "-"):
			vmOpts = append(vmOpts, a)
		case strings.HasPrefix(a, "@"):
			// argument file: not followed
		default:
			return vmOpts, capName(a)
		}
	}
	return vmOpts, ""
}

// MainFromJavaCommand reduces perf data's sun.rt.javaCommand ("pkg.Main args..." or
// "/app/x.jar args...") to the main class or jar base name.
func MainFromJavaCommand(cmd string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(cmd), " ")
	if strings.HasSuffix(first, ".jar") {
		return jarName(first)
	}
	if strings.Contains(first, "/") {
		return moduleMain(first)
	}
	return capName(first)
}

func jarName(p string) string {
	p = p[strings.LastIndexByte(p, '/')+1:]
	return capName(strings.TrimSuffix(p, ".jar"))
}

func moduleMain(m string) string {
	if _, cls, ok := strings.Cut(m, "/"); ok {
		return capName(cls)
	}
	return capName(m)
}

func capName(s string) string {
	if len(s) > maxNameLen {
		s = s[:maxNameLen]
	}
	return strings.ToValidUTF8(s, "")
}
