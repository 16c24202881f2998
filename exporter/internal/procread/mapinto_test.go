package procread

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// MapInto's results may be reused by the next call (the throttle sampler's window): a read
// given up on in one call and returning during the next must not write into them.
func TestMapIntoReusedResultsUntouchedByStuckRead(t *testing.T) {
	dir := t.TempDir()
	stuck := fifo(t, dir, "cpu.stat")
	defer release(t, stuck)
	var healthy []string
	for _, name := range []string{"a", "b"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
		healthy = append(healthy, p)
	}
	pool := NewPool("test", MaxStuck, 0)
	b := Budget{Workers: 1, Item: 100 * time.Millisecond, Gate: NewGate("test"), Kind: "file", Pool: pool}
	id := func(s string) string { return s }

	res := MapInto(context.Background(), b, []string{stuck, healthy[0]}, id, readPath, nil)
	if !errors.Is(res[0].Err, ErrTimeout) || string(res[1].Value) != healthy[0] {
		t.Fatalf("first window: %+v", res)
	}
	if pool.Stuck() != 1 {
		t.Fatalf("stuck reads = %d, want 1", pool.Stuck())
	}
	reused := &res[0]
	res = MapInto(context.Background(), b, healthy, id, readPath, res)
	if &res[0] != reused {
		t.Fatal("results not reused")
	}
	release(t, stuck) // the given-up read of the first window returns now
	waitFor(t, "the stuck read to return", func() bool { return pool.Stuck() == 0 })
	for i, r := range res {
		if !r.Done || r.Err != nil || string(r.Value) != healthy[i] {
			t.Fatalf("second window's item %d overwritten: %+v", i, r)
		}
	}
}
