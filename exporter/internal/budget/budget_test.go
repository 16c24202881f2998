//go:build linux

package budget

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

// units are n units of each tenant in turn: tenants{"a": 3, "b": 1} in order "a a a b".
func units(spec ...any) (Units, []string) {
	var keys []string
	for i := 0; i < len(spec); i += 2 {
		for range spec[i+1].(int) {
			keys = append(keys, spec[i].(string))
		}
	}
	return Units{N: len(keys), Tenant: func(i int) string { return keys[i] }, Name: func(i int) string { return "name of " + keys[i] }}, keys
}

// kept counts the kept units per tenant.
func kept(keys []string, keep []bool) map[string]int {
	out := map[string]int{}
	for i, k := range keys {
		if keep == nil || keep[i] {
			out[k]++
		}
	}
	return out
}

func TestAllotWithinBudgetKeepsAll(t *testing.T) {
	u, _ := units("a", 3, "b", 5)
	if keep, skips := Allot(u, Limit{PerTenant: 5, Node: 8}, Cgroups); keep != nil || skips != nil {
		t.Fatalf("within budget: keep %v, skips %v", keep, skips)
	}
	if keep, skips := Allot(u, Limit{}, Cgroups); keep != nil || skips != nil {
		t.Fatalf("no budget: keep %v, skips %v", keep, skips)
	}
}

func TestAllotPerTenantKeepsFirstUnits(t *testing.T) {
	u, keys := units("calm", 2, "hostile", 2000, "other", 3)
	keep, skips := Allot(u, Limit{PerTenant: 32}, Cgroups)
	got := kept(keys, keep)
	if got["calm"] != 2 || got["hostile"] != 32 || got["other"] != 3 {
		t.Fatalf("kept %v", got)
	}
	// The first 32 of the hostile tenant's units, in the caller's order.
	for i := 2; i < 2+2000; i++ {
		if keep[i] != (i < 2+32) {
			t.Fatalf("unit %d kept %v", i, keep[i])
		}
	}
	want := []Skip{{Budget: Cgroups, Reason: ReasonTenant, Tenant: "hostile", Name: "name of hostile", Kept: 32, Skipped: 1968}}
	if !slices.Equal(skips, want) {
		t.Fatalf("skips %+v, want %+v", skips, want)
	}
}

// Over the node-wide ceiling the largest tenants are cut to a common level; the small ones
// keep everything, and the reason is the node's.
func TestAllotNodeCeilingWaterFills(t *testing.T) {
	u, keys := units("small", 2, "mid", 10, "big", 30, "big2", 30)
	keep, skips := Allot(u, Limit{PerTenant: 32, Node: 40}, Processes)
	got := kept(keys, keep)
	// 2 + 10 whole, 28 left for two: 14 each.
	if got["small"] != 2 || got["mid"] != 10 || got["big"] != 14 || got["big2"] != 14 {
		t.Fatalf("kept %v", got)
	}
	for _, s := range skips {
		if s.Reason != ReasonNode || (s.Tenant != "big" && s.Tenant != "big2") || s.Kept != 14 || s.Skipped != 16 {
			t.Errorf("skip %+v", s)
		}
	}
	// At 41, 29 are left for the two: the level stays 14, the odd one goes to the first cut.
	keep, _ = Allot(u, Limit{PerTenant: 32, Node: 41}, Processes)
	if got := kept(keys, keep); got["big"] != 15 || got["big2"] != 14 || got["small"]+got["mid"]+got["big"]+got["big2"] != 41 {
		t.Fatalf("ceiling 41: kept %v", got)
	}
}

// A tenant over its own budget is reported with that reason even when the ceiling cuts it
// further.
func TestAllotBothReasons(t *testing.T) {
	u, keys := units("hostile", 100, "calm", 5)
	keep, skips := Allot(u, Limit{PerTenant: 32, Node: 20}, Cgroups)
	got := kept(keys, keep)
	if got["calm"] != 5 || got["hostile"] != 15 {
		t.Fatalf("kept %v", got)
	}
	if len(skips) != 1 || skips[0].Reason != ReasonTenant || skips[0].Skipped != 85 {
		t.Fatalf("skips %+v", skips)
	}
}

func TestFill(t *testing.T) {
	for _, c := range []struct {
		wants   []int
		ceiling int
		want    []int
	}{
		{[]int{1, 2, 3}, 10, []int{1, 2, 3}},
		{[]int{5, 5, 5}, 9, []int{3, 3, 3}},
		{[]int{5, 5, 5}, 10, []int{4, 3, 3}},
		{[]int{1, 100, 2}, 9, []int{1, 6, 2}},
		{[]int{100, 100}, 1, []int{1, 0}},
		{[]int{100, 100}, 0, []int{0, 0}},
	} {
		if got := fill(c.wants, c.ceiling); !slices.Equal(got, c.want) {
			t.Errorf("fill(%v, %d) = %v, want %v", c.wants, c.ceiling, got, c.want)
		}
	}
}

func TestTenantOf(t *testing.T) {
	for _, c := range []struct {
		cg        cgroupid.Cgroup
		key, name string
	}{
		{cgroupid.Cgroup{Path: "/kubepods.slice/kubepods-pod1.slice/cri-containerd-x.scope",
			Identity: cgroupid.Identity{PodUID: "1234", ContainerID: "containerd://x"},
			Names:    cgroupid.KubeNames{Namespace: "ns", Pod: "web"}}, "1234", "ns/web"},
		{cgroupid.Cgroup{Path: "/kubepods/pod1234", Identity: cgroupid.Identity{PodUID: "1234"}}, "1234", "pod 1234"},
		{cgroupid.Cgroup{Path: "/docker/abc", Identity: cgroupid.Identity{ContainerID: "docker://abc"}}, "docker://abc", "docker://abc"},
		{cgroupid.Cgroup{Path: "/system.slice/foo.service/x"}, "/system.slice/foo.service", "/system.slice/foo.service"},
		{cgroupid.Cgroup{Path: "/user.slice/user-1000.slice/user@1000.service/app.slice/a.scope"}, "/user.slice/user-1000.slice/user@1000.service", "/user.slice/user-1000.slice/user@1000.service"},
		{cgroupid.Cgroup{Path: "/system.slice"}, "/system.slice", "/system.slice"},
		{cgroupid.Cgroup{Path: "/hostile"}, "/hostile", "/hostile"},
		{cgroupid.Cgroup{Path: "/hostile/c0001/x"}, "/hostile", "/hostile"},
		{cgroupid.Cgroup{Path: "/"}, "/", "/"},
	} {
		if k, n := TenantOf(c.cg), TenantName(c.cg); k != c.key || n != c.name {
			t.Errorf("%s: tenant %q named %q, want %q named %q", c.cg.Path, k, n, c.key, c.name)
		}
	}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The book counts every skipped unit, remembers the last pass's tenants, and logs each
// tenant, budget and reason once per LogEvery, escaped.
func TestBookCountsAndLogsOnce(t *testing.T) {
	var log syncBuffer
	b := NewBook(Defaults(), slog.New(slog.NewTextHandler(&log, nil)))
	skip := Skip{Budget: Cgroups, Reason: ReasonTenant, Tenant: "/evil", Name: "/evil\x1b[31m", Kept: 32, Skipped: 1968}
	for range 5 {
		b.Pass(Cgroups, 40, []Skip{skip})
	}
	b.Refused(Skip{Budget: StuckReads, Reason: ReasonTenant, Tenant: "/evil", Name: "/evil"})
	b.Refused(Skip{Budget: StuckReads, Reason: ReasonTenant, Tenant: "/evil", Name: "/evil"})
	states := map[string]State{}
	for _, s := range b.States() {
		states[s.Budget] = s
	}
	if st := states[Cgroups]; st.Used != 40 || st.Skipped[ReasonTenant] != 5*1968 || st.TenantsOver[ReasonTenant] != 1 {
		t.Errorf("cgroups state %+v", st)
	}
	if st := states[StuckReads]; st.Skipped[ReasonTenant] != 2 {
		t.Errorf("stuck reads state %+v", st)
	}
	lines := strings.Count(log.String(), "tenant over budget")
	if lines != 2 {
		t.Errorf("%d log lines, want one per tenant, budget and reason:\n%s", lines, log.String())
	}
	if strings.Contains(log.String(), "\x1b") {
		t.Errorf("a tenant's escape sequence reached the log: %q", log.String())
	}
	b.Pass(Cgroups, 10, nil) // the tenant is back within budget
	if st := b.States()[0]; st.TenantsOver[ReasonTenant] != 0 || st.Skipped[ReasonTenant] != 5*1968 {
		t.Errorf("after a pass within budget: %+v", st)
	}
}

func TestBookSkipsLiveAndSorted(t *testing.T) {
	b := NewBook(Defaults(), nil)
	b.Pass(Processes, 300, []Skip{{Budget: Processes, Reason: ReasonTenant, Tenant: "a", Skipped: 1}, {Budget: Processes, Reason: ReasonTenant, Tenant: "b", Skipped: 9}})
	b.Pass(Cgroups, 40, []Skip{{Budget: Cgroups, Reason: ReasonTenant, Tenant: "c", Skipped: 3}})
	b.Live(StuckReads, func() (int, []Skip) {
		return 8, []Skip{{Budget: StuckReads, Reason: ReasonTenant, Tenant: "d", Kept: 8}}
	})
	var got []string
	for _, s := range b.Skips() {
		got = append(got, s.Budget+"/"+s.Tenant)
	}
	if want := []string{"cgroups/c", "processes/b", "processes/a", "stuck_reads/d"}; !slices.Equal(got, want) {
		t.Fatalf("skips %v, want %v", got, want)
	}
	for _, s := range b.States() {
		if s.Budget == StuckReads && (s.Used != 8 || s.TenantsOver[ReasonTenant] != 1) {
			t.Errorf("live state %+v", s)
		}
	}
}

func pod(uid string) cgroupid.Cgroup {
	return cgroupid.Cgroup{Path: "/kubepods/pod" + uid, Identity: cgroupid.Identity{PodUID: uid}}
}

// send takes n series of cg's tenant from m and returns how many were allowed.
func send(m *Meter, cg cgroupid.Cgroup, n int) int {
	q, sent := m.For(cg), 0
	for range n {
		if q.Take(40) {
			sent++
		}
	}
	return sent
}

func TestMeterPerTenant(t *testing.T) {
	b := NewBook(Limits{Series: Limit{PerTenant: 100, Node: 10000}}, nil)
	m := b.NewMeter()
	ctx := WithMeter(context.Background(), m)
	if MeterFrom(ctx) != m || MeterFrom(context.Background()) != nil {
		t.Fatal("the meter does not travel in the context")
	}
	var wg sync.WaitGroup
	sent := make([]int, 4)
	for i := range 4 { // four collectors of one tenant at once
		wg.Add(1)
		go func() { defer wg.Done(); sent[i] = send(m, pod("evil"), 1000) }()
	}
	calm := send(m, pod("calm"), 50)
	wg.Wait()
	m.Done()
	if total := sent[0] + sent[1] + sent[2] + sent[3]; total != 100 || calm != 50 {
		t.Fatalf("evil sent %d (want 100), calm %d (want 50)", total, calm)
	}
	skips := b.Skips()
	if len(skips) != 1 || skips[0].Tenant != "evil" || skips[0].Name != "pod evil" || skips[0].Skipped != 3900 || skips[0].Reason != ReasonTenant {
		t.Fatalf("skips %+v", skips)
	}
	var nilMeter *Meter
	if q := nilMeter.For(pod("x")); !q.Take(1 << 20) {
		t.Fatal("a nil meter refuses")
	}
	nilMeter.Done()
}

// Over the node-wide ceiling, the backstop stops the scrape at the ceiling, and the next
// scrape shares it out by the last one's demand: the small tenants keep all their series.
func TestMeterNodeCeiling(t *testing.T) {
	b := NewBook(Limits{Series: Limit{PerTenant: 1000, Node: 1000}}, nil)
	scrape := func() map[string]int {
		m := b.NewMeter()
		out := map[string]int{}
		for i := range 10 {
			cg := pod(fmt.Sprintf("small%d", i))
			out[cg.Identity.PodUID] = send(m, cg, 20)
		}
		for _, uid := range []string{"big1", "big2"} {
			out[uid] = send(m, pod(uid), 900)
		}
		m.Done()
		return out
	}
	first := scrape()
	total := 0
	for _, n := range first {
		total += n
	}
	if total != 1000 {
		t.Fatalf("first scrape sent %d, want the ceiling 1000", total)
	}
	second := scrape()
	total = 0
	for uid, n := range second {
		total += n
		if strings.HasPrefix(uid, "small") && n != 20 {
			t.Errorf("second scrape: %s sent %d, want all 20", uid, n)
		}
	}
	if total != 1000 || second["big1"] != 400 || second["big2"] != 400 {
		t.Errorf("second scrape: %v (total %d)", second, total)
	}
	for _, s := range b.Skips() {
		if s.Reason != ReasonNode {
			t.Errorf("skip %+v: want the node's reason", s)
		}
	}
}

func TestSeriesUnits(t *testing.T) {
	for bytes, want := range map[int]int{0: 1, 1: 1, 350: 1, 512: 1, 513: 2, 1024: 2, 1025: 3, 2304: 5} {
		if got := SeriesUnits(bytes); got != want {
			t.Errorf("SeriesUnits(%d) = %d, want %d", bytes, got, want)
		}
	}
	// A tenant with label values at their caps gets fewer series of the same budget.
	b := NewBook(Limits{Series: Limit{PerTenant: 1000}}, nil)
	m := b.NewMeter()
	q, sent := m.For(pod("long")), 0
	for range 1000 {
		if q.Take(4 * 512) {
			sent++
		}
	}
	if sent != 250 {
		t.Errorf("%d series of 2 KiB of labels within a budget of 1000 units, want 250", sent)
	}
}
