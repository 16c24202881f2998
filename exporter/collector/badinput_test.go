package collector

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	dto "github.com/prometheus/client_model/go"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
)

const burstableContainer = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice/cri-containerd-" + hexA + ".scope"

func v2Env(t *testing.T) (*Env, Config) {
	t.Helper()
	cfg := installHost(t, hosts[0])
	env, err := NewEnv(cfg, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	return env, cfg
}

func errorCount(t *testing.T, env *Env, collector, reason string) float64 {
	t.Helper()
	return testutil.ToFloat64(env.Errors.vec.WithLabelValues(collector, reason))
}

// A malformed file costs that cgroup's series and marks the collector failed; every other
// cgroup is still exported.
func TestMalformedFileSkipsOneCgroup(t *testing.T) {
	for _, tc := range []struct{ file, content, collector string }{
		{"cpu.stat", "usage_usec 10\nuser_usec\n", "cpu"},
		{"cpu.max", "300000\n", "cpu"},
		{"memory.stat", "anon 12 extra\n", "memory"},
		{"memory.current", "\n", "memory"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			env, cfg := v2Env(t)
			dir := filepath.Join(cfg.SysPath, "fs", "cgroup", burstableContainer)
			if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			c, _ := registry[tc.collector].factory(env)
			mfs := scrapeFamilies(t, env, map[string]Collector{tc.collector: c})
			if got := successOf(mfs, tc.collector); got != 0 {
				t.Errorf("success = %v, want 0", got)
			}
			if n := errorCount(t, env, tc.collector, "parse"); n != 1 {
				t.Errorf("read_errors{reason=parse} = %v, want 1", n)
			}
			metric := "quota_cpu_usage_seconds_total"
			if tc.collector == "memory" {
				metric = "quota_memory_usage_bytes"
			}
			if seriesFor(mfs, metric, burstableContainer) != nil && tc.file != "cpu.max" {
				t.Errorf("%s still exported for the broken cgroup", metric)
			}
			if seriesFor(mfs, metric, "/init.scope") == nil {
				t.Errorf("%s missing for a healthy cgroup", metric)
			}
		})
	}
}

// A cgroup removed between discovery and reading is normal churn: counted, not a failure.
func TestCgroupRemovedMidScrape(t *testing.T) {
	env, cfg := v2Env(t)
	env.Cgroups.Cgroups(context.Background()) // discovery sees it
	if err := os.RemoveAll(filepath.Join(cfg.SysPath, "fs", "cgroup", burstableContainer)); err != nil {
		t.Fatal(err)
	}
	cpu, _ := newCPUCollector(env)
	mem, _ := newMemoryCollector(env)
	mfs := scrapeFamilies(t, env, map[string]Collector{"cpu": cpu, "memory": mem})
	if successOf(mfs, "cpu") != 1 || successOf(mfs, "memory") != 1 {
		t.Errorf("a vanished cgroup failed a collector")
	}
	if n := errorCount(t, env, "cpu", "vanished"); n != 1 {
		t.Errorf("read_errors{cpu,vanished} = %v, want 1", n)
	}
	if seriesFor(mfs, "quota_cpu_usage_seconds_total", "/init.scope") == nil {
		t.Error("healthy cgroups missing")
	}
}

// A collector that panics on odd input costs its own series, not the scrape.
func TestPanickingCollectorIsContained(t *testing.T) {
	env, _ := v2Env(t)
	cpu, _ := newCPUCollector(env)
	mfs := scrapeFamilies(t, env, map[string]Collector{"cpu": cpu, "boom": panicker{}})
	if successOf(mfs, "boom") != 0 || successOf(mfs, "cpu") != 1 {
		t.Errorf("success boom=%v cpu=%v", successOf(mfs, "boom"), successOf(mfs, "cpu"))
	}
}

type panicker struct{}

func (panicker) Update(context.Context, chan<- prometheus.Metric) error { panic("odd input") }

func successOf(mfs map[string]*dto.MetricFamily, collector string) float64 {
	mf := mfs["quota_exporter_scrape_collector_success"]
	if mf == nil {
		return -1
	}
	for _, m := range mf.Metric {
		for _, l := range m.Label {
			if l.GetName() == "collector" && l.GetValue() == collector {
				return m.Gauge.GetValue()
			}
		}
	}
	return -1
}

func TestMountinfoWithBadLines(t *testing.T) {
	cfg := installHost(t, hosts[1])
	p := filepath.Join(cfg.ProcPath, "self", "mountinfo")
	b, _ := os.ReadFile(p)
	broken := "garbage without separator\n" + strings.Replace(string(b), "\n", "\n99 1 0:1\n", 1)
	if err := os.WriteFile(p, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := NewEnv(cfg, discardLogger())
	if err != nil {
		t.Fatalf("bad mountinfo lines hid the good ones: %v", err)
	}
	if env.Cgroups.Layout().MalformedMountLines != 2 || env.Cgroups.Layout().Mode != "v1" {
		t.Errorf("layout %s, malformed %d", env.Cgroups.Layout(), env.Cgroups.Layout().MalformedMountLines)
	}
}

// A cgroup whose name is not UTF-8 is exported with the bad bytes replaced, not a panic.
func TestNonUTF8CgroupName(t *testing.T) {
	root := t.TempDir()
	if err := fixture.Write(root, fixture.V2, []fixture.Cgroup{{Path: "/bad\xffname.scope", PIDs: []int{5}, UserUS: 1e6}}); err != nil {
		t.Fatal(err)
	}
	env, err := NewEnv(Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys")}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	cpu, _ := newCPUCollector(env)
	mfs := scrapeFamilies(t, env, map[string]Collector{"cpu": cpu})
	if successOf(mfs, "cpu") != 1 || seriesFor(mfs, "quota_cpu_usage_seconds_total", "/bad\uFFFDname.scope", "mode", "user") == nil {
		t.Errorf("non-UTF-8 cgroup name: success %v, series missing", successOf(mfs, "cpu"))
	}
}
