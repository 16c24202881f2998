package procread

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fifo makes a named pipe: opening it for reading blocks until a writer comes, which is
// what a kernel file stuck behind a lock looks like to the reader.
func fifo(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// release lets a reader blocked on the FIFO's open return (with EOF).
func release(t *testing.T, p string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return // nobody reading any more
	}
	f.Close()
}

func readPath(p string) ([]byte, error) { return os.ReadFile(p) }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestGateDoSkipsStuckFIFO(t *testing.T) {
	dir := t.TempDir()
	p := fifo(t, dir, "cpu.stat")
	g := NewGate("test")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := GateDo(ctx, g, p, "cpu.stat", func() ([]byte, error) { return readPath(p) })
	cancel()
	if !errors.Is(err, ErrTimeout) || errors.Is(err, ErrStuck) {
		t.Fatalf("first read: want a timeout, got %v", err)
	}
	if got := g.Stuck()["cpu.stat"]; got != 1 {
		t.Fatalf("stuck cpu.stat = %d, want 1", got)
	}

	// Later reads fail at once, without a new goroutine.
	before := runtime.NumGoroutine()
	for range 50 {
		begin := time.Now()
		_, err := GateDo(context.Background(), g, p, "cpu.stat", func() ([]byte, error) { return readPath(p) })
		if !errors.Is(err, ErrStuck) || !errors.Is(err, ErrTimeout) {
			t.Fatalf("read of a stuck key: want ErrStuck (a timeout), got %v", err)
		}
		if d := time.Since(begin); d > 100*time.Millisecond {
			t.Fatalf("refusal took %v", d)
		}
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("goroutines grew from %d to %d over 50 refused reads", before, after)
	}

	// Once the original read returns, the key is free again.
	release(t, p)
	waitFor(t, "the stuck read to return", func() bool { return len(g.Stuck()) == 0 })
	v, err := GateDo(context.Background(), g, p, "cpu.stat", func() ([]byte, error) { return []byte("ok"), nil })
	if err != nil || string(v) != "ok" {
		t.Fatalf("after release: %q, %v", v, err)
	}
}

func TestGateEnterOneOutstandingPerKey(t *testing.T) {
	g := NewGate("test")
	leave, err := g.Enter("a", "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Enter("a", "k"); !errors.Is(err, ErrStuck) {
		t.Fatalf("second Enter: %v", err)
	}
	if l, err := g.Enter("b", "k"); err != nil {
		t.Fatalf("other key: %v", err)
	} else {
		l()
	}
	if len(g.Stuck()) != 0 {
		t.Fatal("an outstanding read not given up is not stuck")
	}
	g.MarkStuck("a")
	if g.Stuck()["k"] != 1 || len(g.StuckKeys()) != 1 {
		t.Fatalf("stuck after MarkStuck: %v", g.Stuck())
	}
	leave()
	if len(g.Stuck()) != 0 {
		t.Fatal("leave must clear the stuck mark")
	}
	if l, err := g.Enter("a", "k"); err != nil {
		t.Fatalf("after leave: %v", err)
	} else {
		l()
	}
}

// Ten stuck items and ten healthy ones: the healthy ones are all read, the stuck ones cost
// the first Map about one item budget per worker's share, and later Maps nothing at all.
func TestMapStuckItemsBounded(t *testing.T) {
	dir := t.TempDir()
	var items []string
	var fifos []string
	for i := range 10 {
		p := fifo(t, dir, fmt.Sprintf("stuck%d", i))
		fifos = append(fifos, p)
		q := filepath.Join(dir, fmt.Sprintf("ok%d", i))
		if err := os.WriteFile(q, []byte(q), 0o600); err != nil {
			t.Fatal(err)
		}
		items = append(items, p, q)
	}
	defer func() {
		for _, p := range fifos {
			release(t, p)
		}
	}()
	g := NewGate("test")
	// A second per item: stuck items must return well within it even on a loaded machine.
	b := Budget{Workers: 10, Item: time.Second, Gate: g, Kind: "file"}
	id := func(s string) string { return s }

	check := func(res []Result[[]byte], wantStuck error) {
		t.Helper()
		for i, r := range res {
			if i%2 == 1 {
				if r.Err != nil || string(r.Value) != items[i] {
					t.Fatalf("healthy item %s: %q, %v", items[i], r.Value, r.Err)
				}
			} else if !errors.Is(r.Err, wantStuck) {
				t.Fatalf("stuck item %s: want %v, got %v", items[i], wantStuck, r.Err)
			}
		}
	}
	begin := time.Now()
	res := Map(context.Background(), b, items, id, readPath)
	first := time.Since(begin)
	check(res, ErrTimeout)
	if g.Stuck()["file"] != 10 {
		t.Fatalf("stuck = %v, want 10 files", g.Stuck())
	}
	// 10 workers, 10 stuck items: one budget (plus the ticker's granularity), not ten.
	if first > 5*b.Item {
		t.Errorf("first Map took %v with 10 stuck items; want about one item budget (%v)", first, b.Item)
	}
	base := runtime.NumGoroutine()
	for range 50 {
		begin := time.Now()
		check(Map(context.Background(), b, items, id, readPath), ErrStuck)
		if d := time.Since(begin); d > b.Item {
			t.Fatalf("Map over stuck items took %v", d)
		}
	}
	if after := runtime.NumGoroutine(); after > base+2 {
		t.Fatalf("goroutines grew from %d to %d over 50 Maps", base, after)
	}
	for _, p := range fifos {
		release(t, p)
	}
	waitFor(t, "stuck reads to return", func() bool { return len(g.Stuck()) == 0 })
}

func TestMapDeadline(t *testing.T) {
	dir := t.TempDir()
	p := fifo(t, dir, "blocked")
	defer release(t, p)
	items := []string{p, p + "-missing", p + "-other"}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	res := Map(ctx, Budget{Workers: 1}, items, func(s string) string { return s }, readPath)
	if d := time.Since(begin); d > time.Second {
		t.Fatalf("Map ignored its deadline: %v", d)
	}
	for i, r := range res {
		if !errors.Is(r.Err, ErrTimeout) {
			t.Fatalf("item %d: want timeout, got %v (done %v)", i, r.Err, r.Done)
		}
	}
	if res[1].Done {
		t.Fatal("an item never started is not done")
	}
}

func TestMapPanicIsItemError(t *testing.T) {
	res := Map(context.Background(), Budget{Workers: 2, Gate: NewGate("test")}, []int{1, 2, 3}, func(i int) string { return fmt.Sprint(i) },
		func(i int) (int, error) {
			if i == 2 {
				panic("bad input")
			}
			return i * 10, nil
		})
	if res[0].Value != 10 || res[2].Value != 30 || res[1].Err == nil {
		t.Fatalf("got %+v", res)
	}
}

// Many stuck reads (many hostile processes, each with its own key) cannot add up past a
// pool's ceiling: beyond it the pool's reads are refused at once, the other pool's are not,
// and the count comes back down as the stuck reads return.
func TestNodeWideStuckCap(t *testing.T) {
	dir := t.TempDir()
	// Reads released by earlier tests return asynchronously: start from none.
	waitFor(t, "earlier tests' stuck reads to return", func() bool { return Stuck() == 0 })
	node, perTenant := CgroupFiles.Limits()
	defer CgroupFiles.SetLimits(node, perTenant)
	const ceiling = 16
	CgroupFiles.SetLimits(ceiling, 0)
	kernel := WithPool(context.Background(), CgroupFiles, "")
	var fifos []string
	defer func() {
		for _, p := range fifos {
			release(t, p)
		}
	}()
	for i := range ceiling {
		p := fifo(t, dir, fmt.Sprintf("stuck%d", i))
		fifos = append(fifos, p)
		ctx, cancel := context.WithTimeout(kernel, 10*time.Millisecond)
		_, err := ReadFile(ctx, p, 10)
		cancel()
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if CgroupFiles.Stuck() != ceiling || Stuck() != ceiling {
		t.Fatalf("stuck = %d (all pools %d), want %d", CgroupFiles.Stuck(), Stuck(), ceiling)
	}
	threads := func() int { n, _ := runtime.ThreadCreateProfile(nil); return n }
	before := threads()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, err := ReadFile(kernel, ok, 10); !errors.Is(err, ErrOverloaded) {
			t.Fatalf("read at the cap: %v, want ErrOverloaded", err)
		}
	}
	res := Map(context.Background(), Budget{Workers: 4, Pool: CgroupFiles}, []string{ok, ok}, func(s string) string { return s }, readPath)
	for _, r := range res {
		if !errors.Is(r.Err, ErrOverloaded) {
			t.Fatalf("Map at the cap: %v", r.Err)
		}
	}
	if after := threads(); after > before+2 {
		t.Errorf("threads grew from %d to %d while refusing", before, after)
	}
	// The other pool is not refused.
	if b, err := ReadFile(context.Background(), ok, 10); err != nil || string(b) != "x" {
		t.Fatalf("a process file's read with the cgroup files' pool full: %q, %v", b, err)
	}
	for _, p := range fifos {
		release(t, p)
	}
	fifos = nil
	waitFor(t, "stuck reads to return", func() bool { return Stuck() == 0 })
	if b, err := ReadFile(kernel, ok, 10); err != nil || string(b) != "x" {
		t.Fatalf("after release: %q, %v", b, err)
	}
}

// A tenant's stuck reads stop at its budget: its further reads are refused at once (counted
// and reported by tenant), another tenant's and the cgroup files' reads go on, and its reads
// come back as the stuck ones return.
func TestTenantStuckBudget(t *testing.T) {
	dir := t.TempDir()
	waitFor(t, "earlier tests' stuck reads to return", func() bool { return Stuck() == 0 })
	node, perTenant := ProcessFiles.Limits()
	defer ProcessFiles.SetLimits(node, perTenant)
	ProcessFiles.SetLimits(100, 3)
	var refusals []string
	var mu sync.Mutex
	ProcessFiles.OnRefuse(func(tenant, reason string) {
		mu.Lock()
		refusals = append(refusals, tenant+"/"+reason)
		mu.Unlock()
	})
	defer ProcessFiles.OnRefuse(nil)
	tenant0, _ := ProcessFiles.Refused()

	var evil []string
	for i := range 10 {
		evil = append(evil, fifo(t, dir, fmt.Sprintf("evil%d", i)))
	}
	defer func() {
		for _, p := range evil {
			release(t, p)
		}
	}()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	items := append(append([]string{}, evil...), ok)
	tenants := func(i int) string {
		if items[i] == ok {
			return "calm"
		}
		return "evil"
	}
	b := Budget{Workers: 2, Item: 20 * time.Millisecond, Gate: NewGate("test"), Kind: "environ", Tenant: tenants}
	res := Map(context.Background(), b, items, func(s string) string { return s }, readPath)
	if ProcessFiles.Stuck() != 3 || !slices.Equal(ProcessFiles.StuckTenants(), []string{"evil"}) {
		t.Fatalf("stuck %d of %v, want 3 of the evil tenant", ProcessFiles.Stuck(), ProcessFiles.StuckTenants())
	}
	refused := 0
	for i, r := range res[:10] {
		if errors.Is(r.Err, ErrTenantOverloaded) {
			refused++
			if !errors.Is(r.Err, ErrStuck) {
				t.Errorf("item %d: %v does not wrap ErrStuck", i, r.Err)
			}
		}
	}
	if refused != 7 {
		t.Errorf("%d of the evil tenant's reads refused, want 7", refused)
	}
	if r := res[10]; r.Err != nil || string(r.Value) != "x" {
		t.Errorf("the calm tenant's read: %q, %v", r.Value, r.Err)
	}
	if got := ProcessFiles.AtBudget(); got["evil"] != 3 || len(got) != 1 {
		t.Errorf("at budget: %v", got)
	}
	if tn, _ := ProcessFiles.Refused(); tn-tenant0 != 7 {
		t.Errorf("refusals counted: %d, want 7", tn-tenant0)
	}
	mu.Lock()
	if len(refusals) != 7 || refusals[0] != "evil/tenant" {
		t.Errorf("refusals heard: %v", refusals)
	}
	mu.Unlock()
	// A read of the evil tenant outside Map is refused too; the cgroup files are not.
	if _, err := ReadFile(WithPool(context.Background(), ProcessFiles, "evil"), ok, 10); !errors.Is(err, ErrTenantOverloaded) {
		t.Errorf("ReadFile of the evil tenant: %v", err)
	}
	if _, err := ReadFile(WithPool(context.Background(), CgroupFiles, ""), ok, 10); err != nil {
		t.Errorf("a cgroup file: %v", err)
	}
	for _, p := range evil {
		release(t, p)
	}
	evil = nil
	waitFor(t, "stuck reads to return", func() bool { return ProcessFiles.Stuck() == 0 })
	if _, err := ReadFile(WithPool(context.Background(), ProcessFiles, "evil"), ok, 10); err != nil {
		t.Errorf("after release: %v", err)
	}
}

// A panic in a read function (a parser bug on a tenant's file) is that read's error.
func TestDoRecoversPanic(t *testing.T) {
	_, err := Do(context.Background(), func() (int, error) {
		var m map[string]int
		m["x"]++ //nolint:staticcheck // panics
		return 0, nil
	})
	if !errors.Is(err, ErrPanic) {
		t.Fatalf("err = %v, want ErrPanic", err)
	}
	res := Map(context.Background(), Budget{Workers: 1}, []int{1}, func(int) string { return "k" }, func(int) (int, error) { panic("bad") })
	if !errors.Is(res[0].Err, ErrPanic) {
		t.Fatalf("Map: %v", res[0].Err)
	}
}

// A tenant with more reads than its budget, none stuck, is never refused: its reads beyond
// the budget wait for a slot, so at most the budget run at once.
func TestTenantSlotsWaitNotRefuse(t *testing.T) {
	waitFor(t, "earlier tests' stuck reads to return", func() bool { return Stuck() == 0 })
	node, perTenant := ProcessFiles.Limits()
	defer ProcessFiles.SetLimits(node, perTenant)
	ProcessFiles.SetLimits(100, 3)
	// A stuck read of another tenant makes the pool leave its fast path.
	dir := t.TempDir()
	other := fifo(t, dir, "other")
	defer release(t, other)
	Map(context.Background(), Budget{Workers: 1, Item: 10 * time.Millisecond, Tenant: func(int) string { return "other" }},
		[]string{other}, func(s string) string { return s }, readPath)
	var running, most atomic.Int32
	items := make([]int, 50)
	res := Map(context.Background(), Budget{Workers: 8, Item: time.Second, Tenant: func(int) string { return "busy" }},
		items, func(int) string { return "" }, func(int) (int, error) {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			running.Add(-1)
			return 1, nil
		})
	for i, r := range res {
		if r.Err != nil || r.Value != 1 {
			t.Fatalf("item %d: %v", i, r.Err)
		}
	}
	if m := most.Load(); m > 3 {
		t.Errorf("%d reads of one tenant ran at once, budget 3", m)
	}
}
