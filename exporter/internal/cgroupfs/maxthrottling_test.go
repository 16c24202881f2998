//go:build linux

package cgroupfs

import "testing"

// TestMaxThrottling: a crun container's throttling counters are, counter by counter, the
// larger of its scope's and its subgroup's; its usage stays the scope's; a level without
// throttling counters (no quota, or no cpu controller on v2) leaves the other's.
func TestMaxThrottling(t *testing.T) {
	scope := CPUStat{Periods: 61, ThrottledPeriods: 61, ThrottledSeconds: 10.1, UserSeconds: 3, SystemSeconds: 1, HasThrottling: true, HasUsage: true}
	sub := CPUStat{Periods: 61, ThrottledPeriods: 60, ThrottledSeconds: 9.4, Bursts: 2, BurstSeconds: 0.5, HasThrottling: true, HasBursts: true, UserSeconds: 2}
	got := scope
	got.MaxThrottling(sub)
	want := CPUStat{Periods: 61, ThrottledPeriods: 61, ThrottledSeconds: 10.1, Bursts: 2, BurstSeconds: 0.5,
		UserSeconds: 3, SystemSeconds: 1, HasThrottling: true, HasBursts: true, HasUsage: true}
	if got != want {
		t.Errorf("both levels: %+v, want %+v", got, want)
	}
	unlimited := CPUStat{UserSeconds: 3, SystemSeconds: 1, HasUsage: true} // v2 scope without throttling keys
	got = unlimited
	got.MaxThrottling(sub)
	if got.Periods != 61 || got.ThrottledPeriods != 60 || got.ThrottledSeconds != 9.4 || !got.HasThrottling || got.UserSeconds != 3 {
		t.Errorf("scope without counters: %+v, want the subgroup's counters and the scope's usage", got)
	}
	got = scope
	got.MaxThrottling(CPUStat{})
	if got != scope {
		t.Errorf("subgroup without counters: %+v, want the scope's %+v", got, scope)
	}
}
