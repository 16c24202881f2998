//go:build linux

package budget

import (
	"strconv"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

// podCgroups are a node's cgroups: pods pods of a pod cgroup and two containers each.
func podCgroups(pods int) []cgroupid.Cgroup {
	var cgs []cgroupid.Cgroup
	for p := range pods {
		uid := "0b7c1f4e-0000-4000-8000-" + strconv.Itoa(100000000000+p)
		pod := "/kubepods/burstable/pod" + uid
		cgs = append(cgs, cgroupid.Cgroup{Path: pod, Identity: cgroupid.Identity{PodUID: uid}})
		for c := range 2 {
			cgs = append(cgs, cgroupid.Cgroup{Path: pod + "/" + strconv.Itoa(c), Identity: cgroupid.Identity{PodUID: uid, ContainerID: "containerd://" + strconv.Itoa(c)}})
		}
	}
	return cgs
}

// BenchmarkAllotCgroupsWithinBudget is the usual pass of a budget: every scrape's walk (the
// cgroups budget) and the sampler's adoption of it (the sampled-cgroups budget) over 1000
// pods' 3000 cgroups, none of them over a budget.
func BenchmarkAllotCgroupsWithinBudget(b *testing.B) {
	cgs := podCgroups(1000)
	l := Defaults().SampledCgroups
	b.ReportAllocs()
	for b.Loop() {
		if keep, skips := AllotCgroups(cgs, l, SampledCgroups); keep != nil || skips != nil {
			b.Fatalf("cut within the budget: %v", skips)
		}
	}
}
