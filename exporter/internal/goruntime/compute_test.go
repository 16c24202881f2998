package goruntime

import (
	"maps"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

func TestCompute(t *testing.T) {
	half := CPUQuota{QuotaUS: 50000, PeriodUS: 100000}
	cores := func(q float64) CPUQuota { return CPUQuota{QuotaUS: int64(q * 100000), PeriodUS: 100000} }
	const go124Default = "asynctimerchan=1,containermaxprocs=0,tlsmlkem=0,updatemaxprocs=0,x509sha256skid=0"
	tests := []struct {
		name string
		in   Inputs
		want Result
	}{
		// 1. env
		{"env wins over everything", Inputs{GoVersion: "go1.26.8", AutoMaxProcs: true, EnvGOMAXPROCS: "76", EnvGOMAXPROCSSet: true, CPU: half, Affinity: 2},
			Result{76, SourceEnv, true, true, true}},
		{"env on old runtime", Inputs{GoVersion: "go1.21.0", EnvGOMAXPROCS: "16", EnvGOMAXPROCSSet: true, CPU: half, Affinity: 2},
			Result{16, SourceEnv, false, false, false}},
		{"env 0 ignored", Inputs{GoVersion: "go1.26.8", EnvGOMAXPROCS: "0", EnvGOMAXPROCSSet: true, CPU: cores(3), Affinity: 8},
			Result{3, SourceContainer, true, true, true}},
		{"env garbage ignored", Inputs{GoVersion: "go1.24.3", EnvGOMAXPROCS: "four", EnvGOMAXPROCSSet: true, Affinity: 8},
			Result{8, SourceAffinity, false, false, false}},
		{"env +4 accepted by ParseInt (1.25+)", Inputs{GoVersion: "go1.25.0", EnvGOMAXPROCS: "+4", EnvGOMAXPROCSSet: true, Affinity: 8},
			Result{4, SourceEnv, true, true, true}},
		{"env +4 rejected by old atoi32", Inputs{GoVersion: "go1.24.0", EnvGOMAXPROCS: "+4", EnvGOMAXPROCSSet: true, Affinity: 8},
			Result{8, SourceAffinity, false, false, false}},
		{"env beyond int32 ignored", Inputs{GoVersion: "go1.26.0", EnvGOMAXPROCS: "99999999999", EnvGOMAXPROCSSet: true, Affinity: 8},
			Result{8, SourceContainer, true, true, true}},
		// 2. automaxprocs: floor, min 1, not capped by CPUs
		{"automaxprocs half core", Inputs{GoVersion: "go1.26.8", AutoMaxProcs: true, CPU: half, Affinity: 2},
			Result{1, SourceAutoMaxProcs, true, true, true}},
		{"automaxprocs floors 3.9", Inputs{GoVersion: "go1.22.1", AutoMaxProcs: true, CPU: cores(3.9), Affinity: 64},
			Result{3, SourceAutoMaxProcs, true, false, false}},
		{"automaxprocs above CPU count", Inputs{GoVersion: "go1.26.8", AutoMaxProcs: true, CPU: cores(8), Affinity: 2},
			Result{8, SourceAutoMaxProcs, true, true, true}},
		{"automaxprocs no quota, old runtime", Inputs{GoVersion: "go1.22.1", AutoMaxProcs: true, CPU: CPUQuota{-1, 100000}, Affinity: 16},
			Result{16, SourceAffinity, true, false, false}},
		{"automaxprocs no quota, go1.26: runtime default", Inputs{GoVersion: "go1.26.8", AutoMaxProcs: true, Affinity: 16},
			Result{16, SourceContainer, true, true, true}},
		{"automaxprocs skips when GOMAXPROCS exists but is empty", Inputs{GoVersion: "go1.26.8", AutoMaxProcs: true, EnvGOMAXPROCSSet: true, CPU: cores(0.5), Affinity: 16},
			Result{2, SourceContainer, true, true, true}},
		{"automaxprocs skips on GOMAXPROCS=0, old runtime", Inputs{GoVersion: "go1.23.0", AutoMaxProcs: true, EnvGOMAXPROCS: "0", EnvGOMAXPROCSSet: true, CPU: cores(0.5), Affinity: 16},
			Result{16, SourceAffinity, true, false, false}},
		// 3. Go >= 1.25 container default: ceil, at least 2, at most affinity
		{"container half core", Inputs{GoVersion: "go1.26.8", CPU: half, Affinity: 2},
			Result{2, SourceContainer, true, true, true}},
		{"container half core, 64 CPUs", Inputs{GoVersion: "go1.25.0", CPU: half, Affinity: 64},
			Result{2, SourceContainer, true, true, true}},
		{"container ceil 2.5", Inputs{GoVersion: "go1.25.3", CPU: cores(2.5), Affinity: 64},
			Result{3, SourceContainer, true, true, true}},
		{"container exact 4", Inputs{GoVersion: "go1.26.0", CPU: cores(4), Affinity: 64},
			Result{4, SourceContainer, true, true, true}},
		{"container capped by affinity", Inputs{GoVersion: "go1.26.0", CPU: cores(16), Affinity: 4},
			Result{4, SourceContainer, true, true, true}},
		{"container floor of 2 does not beat affinity 1", Inputs{GoVersion: "go1.26.0", CPU: half, Affinity: 1},
			Result{1, SourceContainer, true, true, true}},
		{"container no quota", Inputs{GoVersion: "go1.26.0", CPU: CPUQuota{0, 100000}, Affinity: 12},
			Result{12, SourceContainer, true, true, true}},
		{"container rc version", Inputs{GoVersion: "go1.25rc1", CPU: half, Affinity: 8},
			Result{2, SourceContainer, true, true, true}},
		{"container devel version", Inputs{GoVersion: "devel go1.26-abcdef Tue Jan 1", CPU: half, Affinity: 8},
			Result{2, SourceContainer, true, true, true}},
		{"container huge quota", Inputs{GoVersion: "go1.26.0", CPU: CPUQuota{1 << 44, 1000}, Affinity: 8},
			Result{8, SourceContainer, true, true, true}},
		// go.mod go <= 1.24 → DefaultGODEBUG turns both off; env GODEBUG wins over it.
		{"go 1.24 module built by 1.26", Inputs{GoVersion: "go1.26.8", DefaultGODEBUG: go124Default, CPU: half, Affinity: 8},
			Result{8, SourceAffinity, false, false, false}},
		{"go 1.24 module, env re-enables", Inputs{GoVersion: "go1.26.8", DefaultGODEBUG: go124Default, EnvGODEBUG: "containermaxprocs=1", CPU: half, Affinity: 8},
			Result{2, SourceContainer, true, true, false}},
		{"env containermaxprocs=0", Inputs{GoVersion: "go1.26.8", EnvGODEBUG: "madvdontneed=1,containermaxprocs=0", CPU: half, Affinity: 8},
			Result{8, SourceAffinity, false, false, true}},
		{"env updatemaxprocs=0 keeps the startup cgroup value", Inputs{GoVersion: "go1.26.8", EnvGODEBUG: "updatemaxprocs=0", CPU: half, Affinity: 8},
			Result{2, SourceContainer, true, true, false}},
		{"env later key wins", Inputs{GoVersion: "go1.26.8", EnvGODEBUG: "containermaxprocs=0,containermaxprocs=1", CPU: half, Affinity: 8},
			Result{2, SourceContainer, true, true, true}},
		{"env bad value leaves DefaultGODEBUG", Inputs{GoVersion: "go1.26.8", DefaultGODEBUG: go124Default, EnvGODEBUG: "containermaxprocs=yes", CPU: half, Affinity: 8},
			Result{8, SourceAffinity, false, false, false}},
		{"negative containermaxprocs is off", Inputs{GoVersion: "go1.26.8", EnvGODEBUG: "containermaxprocs=-1", CPU: half, Affinity: 8},
			Result{8, SourceAffinity, false, false, true}},
		{"GODEBUG ignored before 1.25", Inputs{GoVersion: "go1.24.9", EnvGODEBUG: "containermaxprocs=1", CPU: half, Affinity: 8},
			Result{8, SourceAffinity, false, false, false}},
		// 4. affinity
		{"old runtime, quota ignored", Inputs{GoVersion: "go1.19.13", CPU: half, Affinity: 96},
			Result{96, SourceAffinity, false, false, false}},
		{"unknown affinity counts as 1", Inputs{GoVersion: "go1.20"},
			Result{1, SourceAffinity, false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compute(tt.in); got != tt.want {
				t.Errorf("Compute() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseGODEBUG(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want map[string]string
	}{
		{"", map[string]string{}},
		{"a=1", map[string]string{"a": "1"}},
		{"a=1,b=2,a=3", map[string]string{"a": "3", "b": "2"}},
		{"junk,,a=,=x,b=c=d", map[string]string{"a": "", "": "x", "b": "c=d"}},
	} {
		if got := ParseGODEBUG(tt.in); !maps.Equal(got, tt.want) {
			t.Errorf("ParseGODEBUG(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestGODEBUGInt(t *testing.T) {
	for _, tt := range []struct {
		godebugs []string
		want     int32
	}{
		{nil, 1},
		{[]string{"containermaxprocs=0"}, 0},
		{[]string{"containermaxprocs=0", "containermaxprocs=1"}, 1},          // env after DefaultGODEBUG
		{[]string{"containermaxprocs=1", "containermaxprocs=0"}, 0},          //
		{[]string{"containermaxprocs=0,containermaxprocs=2"}, 2},             // later field wins
		{[]string{"containermaxprocs=0,containermaxprocs=on"}, 0},            // unparsable: skipped
		{[]string{"xcontainermaxprocs=0,containermaxprocsx=0"}, 1},           // exact key only
		{[]string{"containermaxprocs=0", "containermaxprocs=3000000000"}, 0}, // beyond int32
	} {
		if got := GODEBUGInt("containermaxprocs", 1, tt.godebugs...); got != tt.want {
			t.Errorf("GODEBUGInt(%q) = %d, want %d", tt.godebugs, got, tt.want)
		}
	}
}

func TestParseCPUList(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"0-1", 2, true}, {"\t0-1\n", 2, true}, {"0", 1, true}, {"0-3,8,10-11", 7, true}, {"", 0, true},
		{"3-1", 0, false}, {"a", 0, false}, {"0-", 0, false}, {"0,,1", 0, false}, {"-1", 0, false},
		{"0-4194303", 1 << 22, true}, {"0-2147483647", 0, false},
	} {
		got, ok := ParseCPUList(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseCPUList(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestAtLeastGo125(t *testing.T) {
	for v, want := range map[string]bool{
		"go1.25": true, "go1.25rc1": true, "go1.25.0": true, "go1.26.8": true, "go1.26.8 X:boringcrypto": true,
		"devel go1.26-abc Mon": true, "go1.24.9": false, "go1.24rc2": false, "go1.9": false, "": false, "devel": false,
	} {
		if got := AtLeastGo125(v); got != want {
			t.Errorf("AtLeastGo125(%q) = %v, want %v", v, got, want)
		}
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-1", "0-3,8,10-11", "", "3-1", "0-4194303", "1,2,3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n int
		var ok bool
		testutil.AllocBound(t, 16<<10, func() { n, ok = ParseCPUList(s) })
		if n < 0 || (!ok && n != 0) {
			t.Fatalf("ParseCPUList(%q) = %d, %v", s, n, ok)
		}
	})
}

func FuzzCompute(f *testing.F) {
	f.Add("go1.26.8", "containermaxprocs=0", "updatemaxprocs=0,containermaxprocs=1", "76", true, false, int64(50000), int64(100000), 2)
	f.Add("go1.24.0", "", "", "", false, true, int64(-1), int64(100000), 64)
	f.Add("devel go1.26-x", "a=b,,", "=", "+3", true, true, int64(1<<44), int64(1000), 0)
	f.Fuzz(func(t *testing.T, ver, def, env, maxprocs string, set, amp bool, quota, period int64, aff int) {
		var r Result
		testutil.AllocBound(t, 16<<10, func() {
			r = Compute(Inputs{GoVersion: ver, AutoMaxProcs: amp, DefaultGODEBUG: def, EnvGOMAXPROCS: maxprocs,
				EnvGOMAXPROCSSet: set, EnvGODEBUG: env, CPU: CPUQuota{quota, period}, Affinity: aff})
		})
		if r.GOMAXPROCS < 1 || r.Source == "" {
			t.Fatalf("Compute = %+v", r)
		}
		if r.Source == SourceContainer && r.GOMAXPROCS > max(aff, 1) {
			t.Fatalf("container value %d above affinity %d", r.GOMAXPROCS, aff)
		}
		_ = ParseGODEBUG(env)
	})
}
