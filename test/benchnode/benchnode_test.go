package benchnode

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

func TestMain(m *testing.M) {
	ChildMain() // the burner and Go workload children are this test binary
	os.Exit(m.Run())
}

// require is testenv.Require.
var require = testenv.Require

// TestBenchNodeSmoke runs the real-node benchmark once at N = 100 with short windows. It
// asserts only that the run completes, sees the containers, and removes every cgroup and
// process it created: its figures are not timed assertions (make bench-node has those).
func TestBenchNodeSmoke(t *testing.T) {
	reason := CheckHost()
	require(t, reason == "", reason)
	bin := os.Getenv("BENCHNODE_EXPORTER")
	if bin == "" {
		bin = filepath.Join(testenv.RepoRoot(), "bin", "quota_exporter")
	}
	_, err := os.Stat(bin)
	require(t, err == nil, "no exporter binary at "+bin+" (make build)")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := Run(ctx, Options{
		Sizes:        []int{100},
		Workload:     WorkloadOptions{SleepFraction: 0.2, Burners: 1, JVMs: 1, GoPrograms: 1, Self: self},
		Exporters:    []TargetOptions{{Bin: bin}},
		Idle:         3 * time.Second,
		Settle:       500 * time.Millisecond,
		Scrapes:      2,
		ScrapeGap:    200 * time.Millisecond,
		FloorRepeats: 1,
		Logf:         t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || len(rs[0].Exporters) != 1 || rs[0].Floor == nil {
		t.Fatalf("incomplete result: %+v", rs)
	}
	x := rs[0].Exporters[0].Exposition
	if x.Containers != 100 || x.Samples == 0 || rs[0].Floor.Files == 0 {
		t.Errorf("scrape saw %d of 100 containers in %d samples; floor read %d files", x.Containers, x.Samples, rs[0].Floor.Files)
	}
	var sb strings.Builder
	WriteMarkdown(&sb, rs)
	t.Log(sb.String())

	parent := "/" + parentPrefix + strconv.Itoa(os.Getpid()) + parentSuffix
	if left := Leftovers(parent); len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
	// Every child (workload, exporter) is killed and reaped: none is left but zombies on
	// their way out.
	deadline := time.Now().Add(5 * time.Second)
	for {
		kids := liveChildren()
		if len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("processes left behind: %v", kids)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// liveChildren lists this process's children that are not zombies.
func liveChildren() []string {
	ents, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == me && f[0] != "Z" {
			out = append(out, e.Name()+" "+s[:i+1])
		}
	}
	return out
}
