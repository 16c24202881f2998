package procread

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// BenchmarkMapWindow is the throttle sampler's use of Map without its system calls: one
// window of 1000 reads that return at once, behind a gate, counted against CgroupFiles.
// allocs/op is what the window leaves for the garbage collector every second.
func BenchmarkMapWindow(b *testing.B) {
	items := make([]string, 1000)
	for i := range items {
		items[i] = "/sys/fs/cgroup/cpu/kubepods/pod" + strconv.Itoa(i) + "/cpu.stat"
	}
	budget := Budget{Workers: 2, Item: 500 * time.Millisecond, Gate: NewGate("bench"), Kind: "cpu.stat", Pool: CgroupFiles}
	key := func(s string) string { return s }
	read := func(s string) (int, error) { return len(s), nil }
	var res []Result[int]
	b.ReportAllocs()
	for b.Loop() {
		res = MapInto(context.Background(), budget, items, key, read, res)
	}
	for i, r := range res {
		if !r.Done || r.Err != nil || r.Value != len(items[i]) {
			b.Fatalf("item %d: %+v", i, r)
		}
	}
}
