// Package budget shares out what the exporter spends on tenants: each budget bounds what one
// tenant (a Kubernetes pod; off Kubernetes a container, else a top-level cgroup) may cost, under
// a node-wide ceiling, so that a tenant that multiplies cgroups, processes or stuck files costs
// its own series and reads, never the node's or another tenant's.
//
// Allot decides which units of one pass (a discovery walk, a process listing, the sampler's
// set) are kept: each tenant's first PerTenant units in the caller's order, and when the node's
// total is over its ceiling, the largest tenants are cut down to one level until it fits
// (water-filling), so a tenant below that level keeps everything. Meter does the same for the
// series of one scrape, counted as they are emitted. Book keeps what each budget skipped, by
// reason, for the self-metrics, the log (one line per tenant, budget and reason at most every
// LogEvery) and diagnose.
package budget

import (
	"sort"
)

// Budget names: the budget label of quota_exporter_budget_* and the --budget.* flags.
const (
	Cgroups        = "cgroups"
	Processes      = "processes"
	Series         = "series"
	SampledCgroups = "sampled_cgroups"
	StuckReads     = "stuck_reads"
)

// Names lists the budgets in the order the docs and the self-metrics show them.
var Names = []string{Cgroups, Processes, Series, SampledCgroups, StuckReads}

// Reasons a unit is skipped: the tenant's own budget, or the node-wide ceiling.
const (
	ReasonTenant = "tenant"
	ReasonNode   = "node"
)

// Limit is one budget: PerTenant units per tenant, Node units on the node; 0 is no bound.
type Limit struct {
	PerTenant, Node int
}

// Limits are every budget's limits.
type Limits struct {
	Cgroups, Processes, Series, SampledCgroups, StuckReads Limit
}

// Defaults are sized for a node of 100-300 pods of 1-10 containers, each with a few
// processes, with room to spare (docs/sizing.md): a normal pod stays well inside every
// per-tenant budget, and a node at the ceilings stays inside the exporter's 256 MiB.
func Defaults() Limits {
	return Limits{
		// A pod: its slice, the sandbox, up to 10 containers (pod and container cgroups).
		Cgroups: Limit{PerTenant: 32, Node: 5000},
		// Processes inspected: php-fpm or a prefork server runs tens of workers per pod.
		Processes: Limit{PerTenant: 256, Node: 8192},
		// 12 cgroups of 41 series and 10 JVMs of 36 are about 850; 3 000 cgroups about 60 000.
		Series: Limit{PerTenant: 2000, Node: 100000},
		// Read every second: a pod's quota cgroups (pod and containers, 1-12).
		SampledCgroups: Limit{PerTenant: 16, Node: 4000},
		// Each stuck read holds an OS thread and the buffer it reads into (up to its file's
		// cap: 1 MiB for perf data); a tenant's processes stuck behind its own FUSE or NFS mount
		// cost one per kind of read each. The ceiling is for reads of processes' files; kernel
		// cgroup files have one of their own (procread.CgroupFiles).
		StuckReads: Limit{PerTenant: 8, Node: 64},
	}
}

// Of returns the limit of the named budget.
func (l Limits) Of(name string) Limit {
	switch name {
	case Cgroups:
		return l.Cgroups
	case Processes:
		return l.Processes
	case Series:
		return l.Series
	case SampledCgroups:
		return l.SampledCgroups
	case StuckReads:
		return l.StuckReads
	}
	return Limit{}
}

// Skip is what one budget left out of one tenant in one pass.
type Skip struct {
	Budget, Reason string
	// Tenant is the tenant's key (pod UID, container id, top-level cgroup); Name is how a
	// reader knows it (namespace/pod when the kubelet names it).
	Tenant, Name string
	// Kept and Skipped count the tenant's units in the pass.
	Kept, Skipped int
}

// Units describe one pass's units to Allot, in the order they are to be kept (the most
// important first: a tenant's top cgroup before its children, lower PIDs first).
type Units struct {
	N int
	// Tenant is unit i's tenant key.
	Tenant func(i int) string
	// Name is the readable name of unit i's tenant; asked only for tenants that lose units.
	Name func(i int) string
}

// Allot keeps each tenant's first PerTenant units and, when the node's total is still over
// Node, cuts the largest tenants down to a common level (water-filling: the tenants below it
// keep everything; the units left over after the level go one each to the tenants cut, in
// the order they first appear). keep is nil when every unit is kept; otherwise keep[i] tells
// whether unit i is. skips lists each tenant that lost units, with the reason: ReasonTenant
// when its own budget cut it, ReasonNode when only the ceiling did.
func Allot(u Units, l Limit, budget string) (keep []bool, skips []Skip) {
	if u.N == 0 || (l.PerTenant <= 0 && (l.Node <= 0 || u.N <= l.Node)) {
		return nil, nil
	}
	// Every pass runs this over every unit (a walk, a listing, the sampler's set), mostly with
	// one tenant per pod and nothing to cut: a few allocations, whatever the units.
	type tenant struct {
		first               int32 // its first unit
		units, allowed, got int32
	}
	index := make(map[string]int32, u.N) // tenant key -> its place in tenants
	tenants := make([]tenant, 0, u.N)
	of := make([]int32, u.N) // unit -> its tenant's place
	for i := range u.N {
		k := u.Tenant(i)
		t, ok := index[k]
		if !ok {
			t = int32(len(tenants))
			index[k] = t
			tenants = append(tenants, tenant{first: int32(i)})
		}
		of[i] = t
		tenants[t].units++
	}
	total := 0
	for i := range tenants {
		t := &tenants[i]
		t.allowed = t.units
		if l.PerTenant > 0 {
			t.allowed = min(t.units, int32(l.PerTenant))
		}
		total += int(t.allowed)
	}
	nodeCut := l.Node > 0 && total > l.Node
	if nodeCut {
		wants := make([]int, len(tenants))
		for i, t := range tenants {
			wants[i] = int(t.allowed)
		}
		for i, a := range fill(wants, l.Node) {
			tenants[i].allowed = int32(a)
		}
	}
	if !nodeCut && l.PerTenant > 0 {
		over := false
		for _, t := range tenants {
			over = over || t.units > t.allowed
		}
		if !over {
			return nil, nil
		}
	}
	keep = make([]bool, u.N)
	for i, ti := range of {
		t := &tenants[ti]
		if t.got < t.allowed {
			t.got++
			keep[i] = true
		}
	}
	for _, t := range tenants {
		if t.got == t.units {
			continue
		}
		reason := ReasonNode
		if l.PerTenant > 0 && int(t.units) > l.PerTenant {
			reason = ReasonTenant
		}
		key := u.Tenant(int(t.first))
		name := key
		if u.Name != nil {
			name = u.Name(int(t.first))
		}
		skips = append(skips, Skip{Budget: budget, Reason: reason, Tenant: key, Name: name, Kept: int(t.got), Skipped: int(t.units - t.got)})
	}
	return keep, skips
}

// Keep returns the units keep (from Allot) keeps, in place; all of them when keep is nil.
func Keep[T any](units []T, keep []bool) []T {
	if keep == nil {
		return units
	}
	kept := units[:0]
	for i, u := range units {
		if keep[i] {
			kept = append(kept, u)
		}
	}
	return kept
}

// fill shares ceiling out among wants (each tenant's demand, in order of appearance) by
// water-filling: every want is cut to the highest common level at which they fit, and what
// is left below the ceiling goes one unit each to the wants that were cut, in order. A want
// below the level is met whole.
func fill(wants []int, ceiling int) []int {
	out := make([]int, len(wants))
	total := 0
	for _, w := range wants {
		total += w
	}
	if total <= ceiling {
		copy(out, wants)
		return out
	}
	sorted := append([]int(nil), wants...)
	sort.Ints(sorted)
	// The i smallest wants are met whole; the others get (ceiling - their sum) / the rest.
	level, sum := sorted[len(sorted)-1], 0
	for i, w := range sorted {
		if l := (ceiling - sum) / (len(sorted) - i); l < w {
			level = l
			break
		}
		sum += w
	}
	left := ceiling
	for i, w := range wants {
		out[i] = min(w, level)
		left -= out[i]
	}
	// The level is the highest that fits, so fewer units are left than wants were cut.
	for i, w := range wants {
		if left == 0 {
			break
		}
		if w > out[i] {
			out[i]++
			left--
		}
	}
	return out
}
