package collector

import (
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// Host layouts for the golden tests, after real hosts: the paths are what kubelet (systemd and
// cgroupfs drivers), containerd, CRI-O, Docker and systemd create.
const (
	hexA = "4f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8"
	hexB = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"
	hexC = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	hexD = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	hexE = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
	gib  = 1 << 30
	mib  = 1 << 20

	crioUIDC = "2b3c4d5e-6f70-4182-93a4-b5c6d7e8f901"
	crioUIDE = "8e9f0a1b-2c3d-4e4f-8a5b-6c7d8e9f0a1b"
	crioPodC = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2b3c4d5e_6f70_4182_93a4_b5c6d7e8f901.slice"
	crioPodE = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod8e9f0a1b_2c3d_4e4f_8a5b_6c7d8e9f0a1b.slice"

	nestUIDA        = "a0a0a0a0-1111-4111-8111-0000000000a0"
	nestUIDB        = "b0b0b0b0-2222-4222-8222-0000000000b0"
	nestUIDBSystemd = "b0b0b0b0_2222_4222_8222_0000000000b0"
	nestPodA        = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poda0a0a0a0_1111_4111_8111_0000000000a0.slice"
	nestPodB        = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + nestUIDBSystemd + ".slice"
)

type host struct {
	name    string
	mode    fixture.Mode
	cgroups []fixture.Cgroup
	// kubelet are the containers the kubelet's log directories name (installHost writes
	// them and sets Config.PodLogsPath); nil: no names.
	kubelet []testutil.KubeletContainer
}

var hosts = []host{
	{"v2-systemd-kubernetes", fixture.V2, []fixture.Cgroup{
		{Path: "/", PIDs: []int{2}, UserUS: 9e9, SystemUS: 2e9},
		{Path: "/init.scope", PIDs: []int{1}, UserUS: 5e6, SystemUS: 2e6},
		{Path: "/system.slice/containerd.service", PIDs: []int{812, 813}, UserUS: 3e8, SystemUS: 1e8},
		{Path: `/system.slice/app\x2dserver.service`, PIDs: []int{950}, UserUS: 1e6, SystemUS: 1e6, MemUsage: 80 * mib, Anon: 60 * mib, File: 20 * mib, InactiveFile: 5 * mib},
		{Path: "/system.slice/docker-" + hexE + ".scope", PIDs: []int{2001}, QuotaUS: 50000, MemoryLimit: 256 * mib,
			Periods: 5000, Throttled: 4100, ThrottledUS: 400e6, UserUS: 200e6, SystemUS: 30e6, MemUsage: 200 * mib, Anon: 180 * mib, File: 20 * mib, InactiveFile: 10 * mib, PSISomeUS: 90e6, PSIFullUS: 70e6},
		{Path: "/kubepods.slice", MemoryLimit: 7 * gib, UserUS: 4e9, SystemUS: 1e9, MemUsage: 3 * gib, Anon: 2 * gib, File: gib, InactiveFile: gib / 2},
		{Path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice",
			QuotaUS: 300000, MemoryLimit: 2 * gib, Weight: 79, Periods: 12000, Throttled: 3100, ThrottledUS: 812e6, UserUS: 3e9, SystemUS: 2e8, MemUsage: gib, Anon: 900 * mib, File: 124 * mib, InactiveFile: 100 * mib},
		{Path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice/cri-containerd-" + hexA + ".scope",
			PIDs: []int{3001, 3002}, QuotaUS: 300000, BurstUS: 100000, MemoryLimit: 2 * gib, Weight: 79,
			Periods: 12000, Throttled: 3100, ThrottledUS: 812e6, Bursts: 40, BurstUS2: 2e6, UserUS: 2.9e9, SystemUS: 1.9e8,
			MemUsage: gib - mib, Anon: 899 * mib, File: 124 * mib, InactiveFile: 100 * mib, OOMKills: 1, PSISomeUS: 700e6, PSIFullUS: 650e6},
		{Path: "/kubepods.slice/kubepods-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice", QuotaUS: 100000, MemoryLimit: gib},
		{Path: "/kubepods.slice/kubepods-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice/cri-containerd-" + hexB + ".scope",
			PIDs: []int{4001}, QuotaUS: 100000, MemoryLimit: gib, Cpuset: "2-3", Periods: 800, Throttled: 2, ThrottledUS: 1500, UserUS: 6e7, SystemUS: 1e7, MemUsage: 300 * mib, Anon: 250 * mib, File: 50 * mib, InactiveFile: 20 * mib},
		{Path: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod11112222_3333_4444_5555_666677778888.slice/crio-" + hexC + ".scope",
			PIDs: []int{5001}, UserUS: 1e6, SystemUS: 1e6, MemUsage: 50 * mib, Anon: 40 * mib, File: 10 * mib},
		{Path: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod11112222_3333_4444_5555_666677778888.slice/crio-conmon-" + hexC + ".scope",
			PIDs: []int{5000}, MemUsage: mib, Anon: mib},
		{Path: "/user.slice"}, // no process, no limit: not watched
	}, nil},
	{"v1-cgroupfs-kubernetes", fixture.V1, []fixture.Cgroup{
		{Path: "/", PIDs: []int{1, 2}, UserUS: 9e9, SystemUS: 2e9, MemUsage: 4 * gib, Anon: 2 * gib, File: 2 * gib, InactiveFile: gib},
		{Path: "/system.slice/sshd.service", PIDs: []int{700}, UserUS: 1e6, SystemUS: 3e6, MemUsage: 5 * mib, Anon: 4 * mib, File: mib},
		{Path: "/kubepods", MemoryLimit: 7 * gib, Shares: 2048, UserUS: 1e9, SystemUS: 1e8, MemUsage: 2 * gib, Anon: gib, File: gib, InactiveFile: 300 * mib},
		{Path: "/kubepods/burstable/pod8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a", QuotaUS: 100000, MemoryLimit: gib, Shares: 1024},
		{Path: "/kubepods/burstable/pod8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a/" + hexD, PIDs: []int{6001}, QuotaUS: 100000, MemoryLimit: gib, Shares: 1024,
			Periods: 4200, Throttled: 3900, ThrottledUS: 610e6, UserUS: 4.1e8, SystemUS: 2e7, MemUsage: 700 * mib, Anon: 600 * mib, File: 100 * mib, InactiveFile: 60 * mib},
		{Path: "/kubepods/pod2a3b4c5d-6e7f-8091-a2b3-c4d5e6f70819/" + hexB, PIDs: []int{6101}, QuotaUS: 200000, MemoryLimit: 2 * gib, Shares: 2048, Cpuset: "0-1",
			Periods: 900, Throttled: 10, ThrottledUS: 2e6, UserUS: 1e8, SystemUS: 1e7, MemUsage: 512 * mib, Anon: 400 * mib, File: 112 * mib, InactiveFile: 12 * mib},
		{Path: "/kubepods/besteffort/pod99aa88bb-77cc-66dd-55ee-44ff33001122/crio-" + hexC, PIDs: []int{6201}, Shares: 2, UserUS: 5e6, SystemUS: 1e6, MemUsage: 30 * mib, Anon: 30 * mib},
		{Path: "/docker/" + hexE, PIDs: []int{6301}, QuotaUS: 50000, Periods: 3000, Throttled: 2950, ThrottledUS: 900e6, UserUS: 1.4e8, SystemUS: 1.1e7, MemUsage: 100 * mib, Anon: 90 * mib, File: 10 * mib, OOMKills: 2},
	}, nil},
	{"hybrid", fixture.Hybrid, []fixture.Cgroup{
		{Path: "/", PIDs: []int{1, 2, 3}, UserUS: 6e8, SystemUS: 1.3e8, MemUsage: 400 * mib, Anon: 20 * mib, File: 360 * mib, InactiveFile: 180 * mib},
		{Path: "/quota_demo/gc-storm", PIDs: []int{7001}, QuotaUS: 150000, PeriodUS: 50000, Periods: 600, Throttled: 480, ThrottledUS: 3.5e9, UserUS: 1.7e8, SystemUS: 3e6, MemUsage: 300 * mib, Anon: 290 * mib, File: 10 * mib},
		{Path: "/system.slice/docker-" + hexA + ".scope", PIDs: []int{7101}, MemoryLimit: 512 * mib, UserUS: 2e7, SystemUS: 5e6, MemUsage: 400 * mib, Anon: 380 * mib, File: 20 * mib, InactiveFile: 8 * mib},
		{Path: "/user.slice/user-1000.slice/session-2.scope", PIDs: []int{7201}, UserUS: 1e6, SystemUS: 1e6, MemUsage: 10 * mib, Anon: 8 * mib, File: 2 * mib},
	}, nil},
	// CRI-O with crun on v2 (hand-made after crun's cgroup-systemd.c and cri-o's cgmgr): the
	// container's processes and crun's copy of its limits in the scope's "container" subgroup,
	// conmon beside it in the pod slice (conmon_cgroup = "pod") and in system.slice, the
	// sandbox as the empty crio-<id> cgroup of a dropped infra container, and a BestEffort
	// container (no limit, no process in its scope itself).
	{"v2-crio-crun", fixture.V2, []fixture.Cgroup{
		{Path: "/system.slice/crio.service", PIDs: []int{800}, UserUS: 3e8, SystemUS: 1e8, MemUsage: 60 * mib, Anon: 50 * mib, File: 10 * mib},
		{Path: "/system.slice/crio-conmon-" + hexE + ".scope", PIDs: []int{4200}, UserUS: 1e5, SystemUS: 1e5, MemUsage: mib, Anon: mib},
		{Path: crioPodC, QuotaUS: 150000, MemoryLimit: gib, Weight: 59, Periods: 4000, Throttled: 900, ThrottledUS: 150e6,
			UserUS: 1.2e9, SystemUS: 1e8, MemUsage: 500 * mib, Anon: 450 * mib, File: 50 * mib, InactiveFile: 20 * mib},
		{Path: crioPodC + "/crio-" + hexA + ".scope", QuotaUS: 150000, MemoryLimit: gib, Weight: 59, Periods: 4000, Throttled: 880, ThrottledUS: 140e6,
			UserUS: 1.2e9, SystemUS: 0.9e8, MemUsage: 498 * mib, Anon: 448 * mib, File: 50 * mib, InactiveFile: 20 * mib},
		{Path: crioPodC + "/crio-" + hexA + ".scope/container", PIDs: []int{4101, 4102}, QuotaUS: 150000, MemoryLimit: gib, Weight: 59,
			Periods: 4000, Throttled: 910, ThrottledUS: 145e6, UserUS: 1.2e9, SystemUS: 0.9e8, MemUsage: 498 * mib, Anon: 448 * mib, File: 50 * mib, InactiveFile: 20 * mib},
		{Path: crioPodC + "/crio-conmon-" + hexA + ".scope", PIDs: []int{4100}, UserUS: 1e5, SystemUS: 1e5, MemUsage: mib, Anon: mib},
		{Path: crioPodC + "/crio-" + hexD},
		{Path: crioPodE, Weight: 1, UserUS: 2e7, SystemUS: 1e7, MemUsage: 41 * mib, Anon: 30 * mib, File: 11 * mib},
		{Path: crioPodE + "/crio-" + hexE + ".scope", UserUS: 2e7, SystemUS: 1e7, MemUsage: 40 * mib, Anon: 30 * mib, File: 10 * mib},
		{Path: crioPodE + "/crio-" + hexE + ".scope/container", PIDs: []int{4201}, UserUS: 2e7, SystemUS: 1e7, MemUsage: 40 * mib, Anon: 30 * mib, File: 10 * mib},
	}, []testutil.KubeletContainer{
		{Namespace: "shop", Pod: "cart-6d5f8c9b7-t4k2m", UID: crioUIDC, Container: "cart", ID: hexA},
		{Namespace: "batch", Pod: "report-28461730-x7c2p", UID: crioUIDE, Container: "report", ID: hexE},
	}},
	// A tenant in container A (pod A) makes cgroups inside its own container named after pod B
	// and B's container: they are A's, never B's (hand-made: the cgroups a tenant with a
	// writable cgroup mount can make).
	{"v2-nested", fixture.V2, []fixture.Cgroup{
		{Path: nestPodA, QuotaUS: 100000, MemoryLimit: 256 * mib, UserUS: 3e8, SystemUS: 3e7, MemUsage: 120 * mib, Anon: 100 * mib, File: 20 * mib},
		{Path: nestPodA + "/cri-containerd-" + hexA + ".scope", PIDs: []int{5101}, QuotaUS: 100000, MemoryLimit: 256 * mib, Periods: 2000, Throttled: 100, ThrottledUS: 9e6,
			UserUS: 3e8, SystemUS: 3e7, MemUsage: 120 * mib, Anon: 100 * mib, File: 20 * mib},
		{Path: nestPodA + "/cri-containerd-" + hexA + ".scope/kubepods-burstable-pod" + nestUIDBSystemd + ".slice/cri-containerd-" + hexB + ".scope",
			PIDs: []int{5102}, QuotaUS: 10000, UserUS: 1e8, SystemUS: 1e7, MemUsage: 40 * mib, Anon: 40 * mib},
		{Path: nestPodA + "/cri-containerd-" + hexA + ".scope/x/" + hexB, PIDs: []int{5103}, MemoryLimit: 16 * mib, UserUS: 1e7, SystemUS: 1e6, MemUsage: 10 * mib, Anon: 10 * mib},
		{Path: nestPodB, QuotaUS: 200000, MemoryLimit: gib, UserUS: 5e8, SystemUS: 5e7, MemUsage: 400 * mib, Anon: 300 * mib, File: 100 * mib},
		{Path: nestPodB + "/cri-containerd-" + hexB + ".scope", PIDs: []int{5201}, QuotaUS: 200000, MemoryLimit: gib, Periods: 1000, Throttled: 10, ThrottledUS: 1e6,
			UserUS: 5e8, SystemUS: 5e7, MemUsage: 400 * mib, Anon: 300 * mib, File: 100 * mib},
	}, []testutil.KubeletContainer{
		{Namespace: "tenant-a", Pod: "shell-0", UID: nestUIDA, Container: "shell", ID: hexA},
		{Namespace: "tenant-b", Pod: "api-0", UID: nestUIDB, Container: "api", ID: hexB},
	}},
}
