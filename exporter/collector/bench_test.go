package collector

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// kubernetesHost generates a v2 systemd-driver node with n watched cgroups: pods (a pod-level
// cgroup with quota and limit) of two containers each, under the three QoS slices.
func kubernetesHost(n int) []fixture.Cgroup {
	var cgs []fixture.Cgroup
	qos := []string{"burstable", "besteffort", ""}
	for i := 0; len(cgs) < n; i++ {
		q := qos[i%3]
		uid := fmt.Sprintf("%08x_1111_2222_3333_%012x", i, i)
		slice := "/kubepods.slice/kubepods-pod" + uid + ".slice"
		if q != "" {
			slice = fmt.Sprintf("/kubepods.slice/kubepods-%s.slice/kubepods-%s-pod%s.slice", q, q, uid)
		}
		cgs = append(cgs, fixture.Cgroup{Path: slice, QuotaUS: 200000, MemoryLimit: 1 << 30})
		for c := 0; c < 2 && len(cgs) < n; c++ {
			id := fmt.Sprintf("%064x", i*2+c)
			cgs = append(cgs, fixture.Cgroup{Path: slice + "/cri-containerd-" + id + ".scope", PIDs: []int{1000 + i*2 + c},
				QuotaUS: 100000, MemoryLimit: 512 << 20, Periods: 1000, Throttled: 100, ThrottledUS: 5e6,
				UserUS: 1e8, SystemUS: 1e7, MemUsage: 300 << 20, Anon: 200 << 20, File: 100 << 20, InactiveFile: 50 << 20})
		}
	}
	return cgs
}

func benchEnv(b *testing.B, n int) (*Env, string) {
	b.Helper()
	root := memTempDir(b)
	if err := fixture.Write(root, fixture.V2, kubernetesHost(n)); err != nil {
		b.Fatal(err)
	}
	env, err := NewEnv(Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys"), ThrottleWindow: time.Second}, discardLogger())
	if err != nil {
		b.Fatal(err)
	}
	// Benchmarks call newScrape before each Gather: one walk per scrape, shared by the
	// scrape's collectors through the discovery cache as in production.
	return env, filepath.Join(root, "sys", "fs", "cgroup")
}

// BenchmarkScrape is one whole scrape (discovery walk, cpu and memory collectors,
// exposition gathering) of n container cgroups. Every iteration walks again, once, as a
// scrape every 15 s does; cpu-ms/op is the process's CPU time (user+system, all threads)
// per scrape, steadier than ns/op when other work shares the machine.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			env, _ := benchEnv(b, n)
			reg := cgroupRegistry(env)
			measureGather(b, env, reg)
		})
	}
}

// BenchmarkScrapeWalkPerCollector is BenchmarkScrape/1000 with the discovery cache off
// (maxAge 0): the cpu and memory collectors each walk the tree.
func BenchmarkScrapeWalkPerCollector(b *testing.B) {
	env, _ := benchEnv(b, 1000)
	env.Cgroups.MaxAge = 0
	reg := cgroupRegistry(env)
	measureGather(b, nil, reg)
}

// BenchmarkDiscover is the discovery walk alone over 1000 container cgroups (cgroup.procs,
// cpu.max and memory.max of every directory), a part of BenchmarkScrape.
func BenchmarkDiscover(b *testing.B) {
	env, _ := benchEnv(b, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		newScrape(env)
		env.Cgroups.Cgroups(context.Background())
	}
}

func cgroupRegistry(env *Env) *prometheus.Registry {
	cpu, _ := newCPUCollector(env)
	mem, _ := newMemoryCollector(env)
	reg := prometheus.NewRegistry()
	reg.MustRegister((&Set{env: env, collectors: map[string]Collector{"cpu": cpu, "memory": mem}}).Bind(context.Background()))
	return reg
}

// measureGather times b.N whole scrapes of reg, reporting allocations and CPU time. With an
// env, each scrape starts afresh (newScrape) as a scrape 15 s after the last one would.
func measureGather(b *testing.B, env *Env, reg *prometheus.Registry) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		if env != nil {
			newScrape(env)
		}
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportCPU(b, cpuTime()-cpu)
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, d time.Duration) {
	b.ReportMetric(float64(d.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
}

// scrapedFiles are the files a scrape of a v2 container cgroup reads.
var scrapedFiles = []string{"cgroup.procs", "cpu.max", "memory.max", "cpu.stat", "cpu.max.burst", "cpu.weight",
	"cpuset.cpus.effective", "cpu.pressure", "memory.current", "memory.stat", "memory.events", "memory.pressure"}

// BenchmarkReadFloor walks the same tree and reads the same files with os.ReadFile, doing
// nothing with them: the floor a scrape is measured against.
func BenchmarkReadFloor(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			_, dir := benchEnv(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			defer func() { reportCPU(b, cpuTime()-cpu) }()
			for i := 0; i < b.N; i++ {
				eachDir(dir, func(p string) {
					for _, f := range scrapedFiles {
						_, _ = os.ReadFile(filepath.Join(p, f))
					}
				})
			}
		})
	}
}

// eachDir calls fn for every directory below (and including) root, as the floors' walk.
func eachDir(root string, fn func(dir string)) {
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			fn(p)
		}
		return nil
	})
}

// BenchmarkReadFloorRaw is BenchmarkReadFloor with open(2), read(2), close(2) into one
// reused buffer: no *os.File, no poller registration (os.Open on Linux adds four fcntl and an
// epoll_ctl per file), no EOF re-read. The floor a reader could reach; see docs/performance.md.
func BenchmarkReadFloorRaw(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			_, dir := benchEnv(b, n)
			buf := make([]byte, 64<<10)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			defer func() { reportCPU(b, cpuTime()-cpu) }()
			for i := 0; i < b.N; i++ {
				eachDir(dir, func(p string) {
					for _, f := range scrapedFiles {
						fd, err := syscall.Open(p+"/"+f, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
						if err != nil {
							continue
						}
						_, _ = syscall.Read(fd, buf) // a short read is the whole file
						_ = syscall.Close(fd)
					}
				})
			}
		})
	}
}

// BenchmarkReadFloorRawAt is BenchmarkReadFloorRaw/1000 opening each file relative to its
// cgroup directory (openat on an O_PATH descriptor): the kernel resolves one name instead of
// the whole path, and no full path is built per file.
func BenchmarkReadFloorRawAt(b *testing.B) {
	_, dir := benchEnv(b, 1000)
	buf := make([]byte, 64<<10)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		eachDir(dir, func(p string) {
			dfd, err := syscall.Open(p, 0x200000 /* O_PATH */ |syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
			if err != nil {
				return
			}
			for _, f := range scrapedFiles {
				fd, err := syscall.Openat(dfd, f, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
				if err != nil {
					continue
				}
				_, _ = syscall.Read(fd, buf)
				_ = syscall.Close(fd)
			}
			_ = syscall.Close(dfd)
		})
	}
	reportCPU(b, cpuTime()-cpu)
}

// BenchmarkSamplerWindow is one window of the throttling sampler over 1000 cgroups with a
// quota; cpu-%-of-core is its cost per second at the default 1 s window.
func BenchmarkSamplerWindow(b *testing.B) {
	env, _ := benchEnv(b, 1000)
	thr := newThrottleSampler(env, time.Second, nil)
	thr.sampler.Rediscover(context.Background())
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		thr.sampler.Sample(context.Background())
	}
	b.StopTimer()
	reportSampler(b, len(thr.series()), cpuTime()-cpu)
}

// BenchmarkSamplerWindowRealCgroups is the same over 1000 real v1 cgroups (kernfs files, as
// in production). Root only.
func BenchmarkSamplerWindowRealCgroups(b *testing.B) {
	testutil.RequireV1Cgroups(b)
	parent := filepath.Join(testutil.V1Root, "cpu", "quota_exporter_bench.slice") // each cgroup a tenant of its own, as on a node
	defer func() {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			_ = os.Remove(filepath.Join(parent, e.Name()))
		}
		_ = os.Remove(parent)
	}()
	for i := 0; i < 1000; i++ {
		d := filepath.Join(parent, strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cpu.cfs_quota_us"), []byte("50000"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	env, err := NewEnv(Config{ProcPath: "/proc", SysPath: "/sys", CgroupInclude: nil}, discardLogger())
	if err != nil {
		b.Fatal(err)
	}
	thr := newThrottleSampler(env, time.Second, nil)
	thr.sampler.Rediscover(context.Background())
	defer thr.Close()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		thr.sampler.Sample(context.Background())
	}
	b.StopTimer()
	reportSampler(b, len(thr.series()), cpuTime()-cpu)
}

// memTempDir puts benchmark trees on tmpfs when there is one: cgroup files live in memory
// (kernfs), and a disk-backed temp dir would measure the disk's page cache instead.
func memTempDir(b testing.TB) string {
	b.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "quota-exporter-bench-")
	if err != nil {
		return b.TempDir()
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// reportSampler reports the sampler's cost at the default 1 s window as a share of one core,
// from wall time (cpu-%-of-core) and from CPU time (cpu-%-of-core-cputime).
func reportSampler(b *testing.B, cgroups int, cpu time.Duration) {
	b.ReportMetric(float64(cgroups), "cgroups")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e9*100, "cpu-%-of-core")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e9*100, "cpu-%-of-core-cputime")
}
