package collector

import "github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"

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
)

type host struct {
	name    string
	mode    fixture.Mode
	cgroups []fixture.Cgroup
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
	}},
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
	}},
	{"hybrid", fixture.Hybrid, []fixture.Cgroup{
		{Path: "/", PIDs: []int{1, 2, 3}, UserUS: 6e8, SystemUS: 1.3e8, MemUsage: 400 * mib, Anon: 20 * mib, File: 360 * mib, InactiveFile: 180 * mib},
		{Path: "/quota_demo/gc-storm", PIDs: []int{7001}, QuotaUS: 150000, PeriodUS: 50000, Periods: 600, Throttled: 480, ThrottledUS: 3.5e9, UserUS: 1.7e8, SystemUS: 3e6, MemUsage: 300 * mib, Anon: 290 * mib, File: 10 * mib},
		{Path: "/system.slice/docker-" + hexA + ".scope", PIDs: []int{7101}, MemoryLimit: 512 * mib, UserUS: 2e7, SystemUS: 5e6, MemUsage: 400 * mib, Anon: 380 * mib, File: 20 * mib, InactiveFile: 8 * mib},
		{Path: "/user.slice/user-1000.slice/session-2.scope", PIDs: []int{7201}, UserUS: 1e6, SystemUS: 1e6, MemUsage: 10 * mib, Anon: 8 * mib, File: 2 * mib},
	}},
}
