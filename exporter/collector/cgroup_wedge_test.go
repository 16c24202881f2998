//go:build linux

package collector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// One cgroup's cpu.weight and memory.stat block inside the kernel (links to a FUSE file whose
// server does not answer; a FIFO cannot do this, the exporter opens files non-blocking). The
// settings read of that cgroup costs one budget once and is then skipped while stuck; no other
// cgroup's settings wait for it (no lock is held across the read); the cpu and memory
// collectors serve every other cgroup's series, weight included, within the deadline in
// every scrape, and skip the stuck cgroup's files; once the server answers, the reads
// return and the cgroup is read again.
func TestCgroupFilesBlockedInKernel(t *testing.T) {
	fuse := testutil.MountStuckFUSE(t)
	root := t.TempDir()
	if err := fixture.Write(root, fixture.V2, []fixture.Cgroup{
		{Path: "/ok.scope", PIDs: []int{10}, QuotaUS: 50000, UserUS: 1e6, Weight: 200},
		{Path: "/stuck.scope", PIDs: []int{11}, QuotaUS: 50000, UserUS: 2e6},
	}); err != nil {
		t.Fatal(err)
	}
	weight := filepath.Join(root, "sys/fs/cgroup/stuck.scope/cpu.weight")
	if err := os.Remove(weight); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fuse.Data, weight); err != nil {
		t.Fatal(err)
	}
	// The memory collector's file too: it reads cgroups through a gate of its own.
	memStat := filepath.Join(root, "sys/fs/cgroup/stuck.scope/memory.stat")
	if err := os.Remove(memStat); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fuse.Data, memStat); err != nil {
		t.Fatal(err)
	}
	env, err := NewEnv(Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys")}, promslog.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	cgs, _ := env.Cgroups.Cgroups(context.Background())
	byPath := map[string]cgroupid.Cgroup{}
	for _, cg := range cgs {
		byPath[cg.Path] = cg
	}
	stuck, ok := byPath["/stuck.scope"], byPath["/ok.scope"]

	type result struct {
		err  error
		took time.Duration
	}
	first := make(chan result, 1)
	go func() {
		begin := time.Now()
		_, err := env.Cgroups.Settings(stuck, true)
		first <- result{err, time.Since(begin)}
	}()
	fuse.WaitRead(t, 5*time.Second) // the read is in the kernel now
	begin := time.Now()
	st, err := env.Cgroups.Settings(ok, true)
	if d := time.Since(begin); err != nil || !st.HasWeight || st.Weight != 200 || d > cgroups.SettingsBudget/2 {
		t.Fatalf("another cgroup's settings while one read is stuck: %+v, %v after %v", st, err, d)
	}
	r := <-first
	if !errors.Is(r.err, procread.ErrTimeout) || r.took > cgroups.SettingsBudget+500*time.Millisecond {
		t.Fatalf("stuck read: %v after %v; want a timeout after about %v", r.err, r.took, cgroups.SettingsBudget)
	}
	discovery := func() map[string]int { return stuckOf(env, cgroups.DiscoveryErrors) } // the cgroup source's gate
	if n := discovery()["cpu settings"]; n != 1 {
		t.Fatalf("stuck cpu settings reads = %d, want 1", n)
	}
	// Stuck: later calls answer at once, without counting the timeout again.
	begin = time.Now()
	if _, err := env.Cgroups.Settings(stuck, true); err != nil || time.Since(begin) > 100*time.Millisecond {
		t.Fatalf("stuck settings: %v after %v", err, time.Since(begin))
	}

	set, err := NewSet(env, []string{"cpu", "memory"})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	for i := range 20 {
		mfs := gatherWithinDeadline(t, set, i)
		got := seriesKeys(mfs, "")
		for _, want := range []string{"quota_cpu_weight,cgroup=/ok.scope", "quota_cpu_usage_seconds_total,cgroup=/ok.scope",
			"quota_cpu_usage_seconds_total,cgroup=/stuck.scope", "quota_memory_usage_bytes,cgroup=/ok.scope"} {
			found := false
			for k := range got {
				found = found || k == want || strings.HasPrefix(k, want+",")
			}
			if !found {
				t.Fatalf("scrape %d lacks %s", i, want)
			}
		}
	}

	if got := stuckByKind(env)["memory/cgroup files"]; got != 1 {
		t.Errorf("stuck memory cgroup files = %d, want 1", got)
	}
	if strings.Contains(fmt.Sprint(seriesKeys(gatherWithinDeadline(t, set, 20), "")), "quota_memory_usage_bytes,cgroup=/stuck.scope") {
		t.Error("the stuck cgroup's memory series exported")
	}

	fuse.Answer()
	waitUntil(t, func() bool { return len(discovery()) == 0 && len(stuckByKind(env)) == 0 })
	if _, err := env.Cgroups.Settings(stuck, true); errors.Is(err, procread.ErrTimeout) {
		t.Fatalf("after the server answered: %v", err) // it answers 'x'es: a parse error
	}
}

// stuckOf is what quota_exporter_stuck_reads says of one collector's gates: its stuck reads
// by kind.
func stuckOf(env *Env, collector string) map[string]int {
	out := map[string]int{}
	for k, n := range stuckByKind(env) {
		if kind, ok := strings.CutPrefix(k, collector+"/"); ok {
			out[kind] = n
		}
	}
	return out
}

// stuckByKind sums the stuck reads of every gate of env by "collector/kind".
func stuckByKind(env *Env) map[string]int {
	out := map[string]int{}
	env.Stuck.mu.Lock()
	defer env.Stuck.mu.Unlock()
	for _, g := range env.Stuck.gates {
		for kind, n := range g.Stuck() {
			out[g.Name()+"/"+kind] += n
		}
	}
	return out
}
