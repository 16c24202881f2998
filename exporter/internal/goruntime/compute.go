package goruntime

import (
	"go/version"
	"math"
	"strconv"
	"strings"
)

// Source names the rule that decides a Go process's GOMAXPROCS.
type Source string

const (
	SourceEnv          Source = "env"          // GOMAXPROCS environment variable > 0
	SourceAutoMaxProcs Source = "automaxprocs" // go.uber.org/automaxprocs called runtime.GOMAXPROCS
	SourceContainer    Source = "container"    // Go >= 1.25 runtime default with the cgroup limit
	SourceAffinity     Source = "affinity"     // runtime default: CPUs in the affinity mask
)

// CPUQuota is the CFS bandwidth limit of the cgroup the process is in. It must be the
// process's own (leaf) cpu cgroup, not the tightest ancestor: both the Go runtime and
// automaxprocs read only the leaf. QuotaUS or PeriodUS <= 0 means unlimited (v1 quota -1,
// v2 "max").
type CPUQuota struct {
	QuotaUS, PeriodUS int64
}

func (q CPUQuota) limited() bool { return q.QuotaUS > 0 && q.PeriodUS > 0 }

// cores is quota/period computed in float64, as both the runtime and automaxprocs do.
func (q CPUQuota) cores() float64 { return float64(q.QuotaUS) / float64(q.PeriodUS) }

// Inputs are everything GOMAXPROCS depends on, gathered from a process by Inspect.
type Inputs struct {
	GoVersion      string // runtime version from build info, e.g. "go1.26.8"
	AutoMaxProcs   bool   // go.uber.org/automaxprocs linked in
	DefaultGODEBUG string // DefaultGODEBUG build setting (from go.mod's go line, godebug directives)
	// GOMAXPROCS env: automaxprocs only checks that it exists, the runtime needs a positive number.
	EnvGOMAXPROCS    string
	EnvGOMAXPROCSSet bool
	EnvGODEBUG       string
	CPU              CPUQuota
	Affinity         int // CPUs in the affinity mask (Cpus_allowed_list)
}

// Result is the GOMAXPROCS a process is expected to run with.
type Result struct {
	GOMAXPROCS int
	Source     Source
	// ContainerAware: automaxprocs is linked in or the Go >= 1.25 cgroup-aware default is on,
	// whether or not an env var overrides both.
	ContainerAware bool
	// ContainerMaxProcs and UpdateMaxProcs are the runtime's effective GODEBUG switches
	// (always false before Go 1.25, which has neither).
	ContainerMaxProcs bool
	UpdateMaxProcs    bool
}

// Compute applies the runtime's precedence (runtime/proc.go schedinit, runtime/cgroup_linux.go
// defaultGOMAXPROCS/adjustCgroupGOMAXPROCS, automaxprocs maxprocs.Set).
func Compute(in Inputs) Result {
	var r Result
	modern := AtLeastGo125(in.GoVersion)
	if modern {
		// runtime1.go parseRuntimeDebugVars: defaults (1), then DefaultGODEBUG, then the
		// env GODEBUG, each left to right, later settings win. Only > 0 enables the cgroup
		// input (cgroup_linux.go), any != 0 enables updates (proc.go sysmon).
		r.ContainerMaxProcs = GODEBUGInt("containermaxprocs", 1, in.DefaultGODEBUG, in.EnvGODEBUG) > 0
		r.UpdateMaxProcs = GODEBUGInt("updatemaxprocs", 1, in.DefaultGODEBUG, in.EnvGODEBUG) != 0
	}
	r.ContainerAware = in.AutoMaxProcs || r.ContainerMaxProcs

	if n, ok := envGOMAXPROCS(in.EnvGOMAXPROCS, modern); in.EnvGOMAXPROCSSet && ok {
		r.GOMAXPROCS, r.Source = n, SourceEnv
		return r
	}
	// automaxprocs honours any GOMAXPROCS that exists (even empty or invalid) and leaves
	// GOMAXPROCS alone without a quota; then the runtime default applies, updates included.
	if in.AutoMaxProcs && !in.EnvGOMAXPROCSSet && in.CPU.limited() {
		f := math.Floor(in.CPU.cores())
		n := 1
		if f > 1 {
			n = int(min(f, math.MaxInt32))
		}
		r.GOMAXPROCS, r.Source = n, SourceAutoMaxProcs
		return r
	}
	procs := max(in.Affinity, 1) // getCPUCount: an empty mask counts as 1
	if !r.ContainerMaxProcs {
		r.GOMAXPROCS, r.Source = procs, SourceAffinity
		return r
	}
	r.Source = SourceContainer
	if in.CPU.limited() {
		// ceil, then never below 2, then never above the affinity count.
		if limit := max(math.Ceil(in.CPU.cores()), 2); limit < float64(procs) {
			procs = int(limit)
		}
	}
	r.GOMAXPROCS = procs
	return r
}

// envGOMAXPROCS parses GOMAXPROCS like the runtime: Go >= 1.25 uses strconv.ParseInt(s, 10, 32),
// older runtimes their own atoi32 (digits only, no sign); only n > 0 counts.
func envGOMAXPROCS(s string, modern bool) (int, bool) {
	if !modern && (strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-")) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n <= 0 {
		return 0, false
	}
	return int(n), true
}

// AtLeastGo125 reports whether a build-info Go version ("go1.25.0", "go1.25rc1",
// "devel go1.26-abcdef ...", "go1.26.8 X:boringcrypto") is a runtime with cgroup-aware GOMAXPROCS.
func AtLeastGo125(goVersion string) bool {
	v := strings.TrimPrefix(strings.TrimSpace(goVersion), "devel ")
	if f := strings.Fields(v); len(f) > 0 {
		v = f[0]
	}
	if !version.IsValid(v) {
		return false
	}
	return version.Compare(v, "go1.25") >= 0
}

// GODEBUGInt returns the runtime's integer setting key after applying each GODEBUG string in
// order (DefaultGODEBUG, then the env). As in the runtime a value that does not parse as an
// int32 is skipped, so it leaves the previous value in place rather than resetting it.
func GODEBUGInt(key string, def int32, godebugs ...string) int32 {
	v := def
	for _, s := range godebugs {
		for field := range strings.SplitSeq(s, ",") {
			k, val, ok := strings.Cut(field, "=")
			if !ok || k != key {
				continue
			}
			if n, err := strconv.ParseInt(val, 10, 32); err == nil {
				v = int32(n)
			}
		}
	}
	return v
}
