package collector

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// kubernetesHost generates a v2 systemd-driver node with n container cgroups: pods of two
// containers each, all with quotas and limits, under the three QoS slices.
func kubernetesHost(n int) []fixture.Cgroup {
	var cgs []fixture.Cgroup
	qos := []string{"burstable", "besteffort", ""}
	for i := 0; i < n; i += 2 {
		q := qos[(i/2)%3]
		uid := fmt.Sprintf("%08x_1111_2222_3333_%012x", i, i)
		slice := "/kubepods.slice/kubepods-pod" + uid + ".slice"
		if q != "" {
			slice = fmt.Sprintf("/kubepods.slice/kubepods-%s.slice/kubepods-%s-pod%s.slice", q, q, uid)
		}
		cgs = append(cgs, fixture.Cgroup{Path: slice, QuotaUS: 200000, MemoryLimit: 1 << 30})
		for c := 0; c < 2 && i+c < n; c++ {
			id := fmt.Sprintf("%064x", i*2+c)
			cgs = append(cgs, fixture.Cgroup{Path: slice + "/cri-containerd-" + id + ".scope", PIDs: []int{1000 + i + c},
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
	env.Cgroups.maxAge = 0 // every scrape walks, as it would every 15 s
	return env, filepath.Join(root, "sys", "fs", "cgroup")
}

// BenchmarkScrape is one whole scrape (discovery walk, cpu and memory collectors,
// exposition gathering) of n container cgroups.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			env, _ := benchEnv(b, n)
			cpu, _ := newCPUCollector(env)
			mem, _ := newMemoryCollector(env)
			reg := prometheus.NewRegistry()
			reg.MustRegister((&Set{env: env, collectors: map[string]Collector{"cpu": cpu, "memory": mem}}).Bind(context.Background()))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
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
			for i := 0; i < b.N; i++ {
				_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
					if err != nil || !d.IsDir() {
						return nil
					}
					for _, f := range scrapedFiles {
						_, _ = os.ReadFile(filepath.Join(p, f))
					}
					return nil
				})
			}
		})
	}
}

// BenchmarkSamplerWindow is one window of the throttling sampler over 1000 cgroups with a
// quota; cpu-%-of-core is its cost per second at the default 1 s window.
func BenchmarkSamplerWindow(b *testing.B) {
	env, _ := benchEnv(b, 1000)
	thr := newThrottleSampler(env, time.Second)
	thr.rediscover(context.Background(), 1)
	buf := make([]byte, 4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		thr.sample(buf)
	}
	b.StopTimer()
	b.ReportMetric(float64(len(thr.series)), "cgroups")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e9*100, "cpu-%-of-core")
}

// BenchmarkSamplerWindowRealCgroups is the same over 1000 real v1 cgroups (kernfs files, as
// in production). Root only.
func BenchmarkSamplerWindowRealCgroups(b *testing.B) {
	testutil.RequireV1Cgroups(b)
	parent := filepath.Join(testutil.V1Root, "cpu", "quota_exporter_bench")
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
	thr := newThrottleSampler(env, time.Second)
	thr.rediscover(context.Background(), 1)
	defer thr.Close()
	buf := make([]byte, 4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		thr.sample(buf)
	}
	b.StopTimer()
	b.ReportMetric(float64(len(thr.series)), "cgroups")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e9*100, "cpu-%-of-core")
}

// memTempDir puts benchmark trees on tmpfs when there is one: cgroup files live in memory
// (kernfs), and a disk-backed temp dir would measure the disk's page cache instead.
func memTempDir(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "quota-exporter-bench-")
	if err != nil {
		return b.TempDir()
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
