//go:build linux

package budget

import (
	"sort"
	"strings"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

// TenantOf is the key of the tenant a cgroup belongs to: its pod's UID; off Kubernetes its
// container's id; else its top-level cgroup below the hierarchy root, where systemd's slices
// count as the root's (slices group units; the unit is the tenant: /system.slice/foo.service,
// /user.slice/user-1000.slice/user@1000.service), and "/" for the root. The three never
// collide: a UID has no slash, an id has "://", a path starts with "/". It allocates
// nothing: the key is a field or a prefix of the path.
func TenantOf(cg cgroupid.Cgroup) string {
	switch {
	case cg.Identity.PodUID != "":
		return cg.Identity.PodUID
	case cg.Identity.ContainerID != "":
		return cg.Identity.ContainerID
	}
	return topLevel(cg.Path)
}

// TenantName is how a reader knows cg's tenant: namespace/pod when the kubelet names the pod,
// else its key ("pod <uid>" for a pod). Tenants choose these strings: print them escaped.
func TenantName(cg cgroupid.Cgroup) string {
	switch {
	case cg.Identity.PodUID != "" && cg.Names.Pod != "":
		return cg.Names.Namespace + "/" + cg.Names.Pod
	case cg.Identity.PodUID != "":
		return "pod " + cg.Identity.PodUID
	}
	return TenantOf(cg)
}

// topLevel is the path up to its first segment that is not a systemd slice (the whole path
// when every segment is one).
func topLevel(path string) string {
	if len(path) <= 1 || path[0] != '/' {
		return "/"
	}
	end := 0
	for end < len(path) {
		next := strings.IndexByte(path[end+1:], '/')
		seg := path[end+1:]
		if next >= 0 {
			seg = path[end+1 : end+1+next]
		}
		end += 1 + len(seg)
		if !strings.HasSuffix(seg, ".slice") {
			break
		}
	}
	return path[:end]
}

// AllotCgroups is Allot over cgroups, each tenant's shallowest first (its pod or top cgroup,
// then its containers, then what lies below them), so that what a tenant keeps is its top
// and not a corner of its subtree. cgs are in any order; keep is by index into cgs.
func AllotCgroups(cgs []cgroupid.Cgroup, l Limit, name string) (keep []bool, skips []Skip) {
	return AllotCgroupsAt(len(cgs), func(i int) *cgroupid.Cgroup { return &cgs[i] }, l, name)
}

// AllotCgroupsAt is AllotCgroups over the n cgroups at(0) ... at(n-1), for a caller that
// selects cgroups from a larger set without copying them.
func AllotCgroupsAt(n int, at func(i int) *cgroupid.Cgroup, l Limit, name string) (keep []bool, skips []Skip) {
	u := Units{N: n, Tenant: func(i int) string { return TenantOf(*at(i)) }, Name: func(i int) string { return TenantName(*at(i)) }}
	if keep, _ = Allot(u, l, name); keep == nil { // within every budget: the usual case, no sort
		return nil, nil
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		pa, pb := at(order[a]).Path, at(order[b]).Path
		if da, db := strings.Count(pa, "/"), strings.Count(pb, "/"); da != db {
			return da < db
		}
		return pa < pb
	})
	byDepth := Units{N: n, Tenant: func(i int) string { return TenantOf(*at(order[i])) }, Name: func(i int) string { return TenantName(*at(order[i])) }}
	kept, skips := Allot(byDepth, l, name)
	keep = make([]bool, n)
	for i, k := range kept {
		keep[order[i]] = k
	}
	return keep, skips
}
