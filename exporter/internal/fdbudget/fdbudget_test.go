//go:build linux

package fdbudget

import "testing"

// Two holders draw from one budget: the sampler's spare takes leave the reserve, the OOM
// watcher's takes may use it and what the sampler does not hold; a release beyond what was
// taken does not grow the budget, and a nil budget grants nothing.
func TestBudgetShared(t *testing.T) {
	b := New(4, 1)
	if got := b.TakeSpare(10); got != 3 { // the sampler's files: all but the reserve
		t.Fatalf("TakeSpare(10) = %d, want 3", got)
	}
	if got := b.Take(5); got != 1 { // the OOM watcher's eventfds: the reserve
		t.Fatalf("Take(5) = %d, want the reserved 1", got)
	}
	if got := b.Take(1); got != 0 {
		t.Fatalf("Take(1) of a spent budget = %d", got)
	}
	b.Release(2) // the sampler closed two files
	if got := b.Take(5); got != 2 {
		t.Fatalf("Take(5) = %d, want the 2 the sampler gave back", got)
	}
	if got := b.TakeSpare(1); got != 0 {
		t.Fatalf("TakeSpare(1) = %d of a spent budget", got)
	}
	b.Release(10)
	if got := b.Take(10); got != 4 {
		t.Fatalf("after an excess release Take(10) = %d, want the size 4", got)
	}
	var none *Budget
	if none.Take(1) != 0 || none.TakeSpare(1) != 0 || none.Size() != 0 {
		t.Fatal("a nil budget granted descriptors")
	}
	none.Release(1)
}

// At RLIMIT_NOFILE 1024 the budgets are the ones documented in docs/reliability.md.
func TestFromRlimit(t *testing.T) {
	if b := FromRlimit(); b.Size() <= 0 {
		t.Fatal("no budget from RLIMIT_NOFILE")
	}
	b := forLimit(1024)
	if s := b.TakeSpare(1024); s != 512 {
		t.Errorf("the sampler may hold %d files at 1024, want 512", s)
	}
	if o := b.Take(1024); o != 256 {
		t.Errorf("the OOM watcher may hold %d eventfds beside them, want 256", o)
	}
}
