//go:build linux

package collector

import (
	dto "github.com/prometheus/client_model/go"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMemoryDetail: with --memory.detail, each cgroup's memory.stat types and memory.events
// counts are exported as the files say (read here independently), on every fixture host;
// without it none of these series exist (the default series budget).
func TestMemoryDetail(t *testing.T) {
	for _, h := range allHosts() {
		t.Run(h.name, func(t *testing.T) {
			cfg := installHost(t, h)
			for _, detail := range []bool{false, true} {
				cfg.MemoryDetail = detail
				env, err := NewEnv(cfg, discardLogger())
				if err != nil {
					t.Fatal(err)
				}
				mem, _ := newMemoryCollector(env)
				mfs := scrapeFamilies(t, env, map[string]Collector{"memory": mem})
				if !detail {
					for _, n := range []string{"quota_memory_stat_bytes", "quota_memory_events_total", "quota_memory_peak_bytes", "quota_memory_high_bytes"} {
						if mfs[n] != nil {
							t.Errorf("%s exported without --memory.detail", n)
						}
					}
					continue
				}
				l := env.Cgroups.Layout()
				v2 := l.Memory.Version == 2
				checked := 0
				for _, m := range mfs["quota_memory_usage_bytes"].GetMetric() {
					path := labelOf(m, "cgroup")
					dir := l.Memory.Dir(path)
					stat := keyedFile(t, filepath.Join(dir, "memory.stat"))
					want := map[string]string{"anon": "anon", "file": "file", "shmem": "shmem", "kernel": "kernel", "sock": "sock", "anon_thp": "anon_thp"}
					if !v2 {
						want = map[string]string{"anon": "total_rss", "file": "total_cache", "shmem": "total_shmem", "anon_thp": "total_rss_huge"}
					}
					for typ, key := range want {
						v, ok := stat[key]
						got := seriesFor(mfs, "quota_memory_stat_bytes", path, "type", typ)
						switch {
						case !ok && got != nil:
							t.Errorf("%s: stat %s exported, but %s has no %s", path, typ, dir, key)
						case ok && got == nil:
							t.Errorf("%s: stat %s missing (%s = %d)", path, typ, key, v)
						case ok && uint64(got.GetGauge().GetValue()) != v:
							t.Errorf("%s: stat %s = %v, file says %d", path, typ, got.GetGauge().GetValue(), v)
						}
					}
					if v2 {
						events := keyedFile(t, filepath.Join(dir, "memory.events"))
						for _, typ := range []string{"high", "max", "oom", "oom_group_kill"} {
							got := seriesFor(mfs, "quota_memory_events_total", path, "type", typ)
							if got == nil || uint64(got.GetCounter().GetValue()) != events[typ] {
								t.Errorf("%s: events %s = %v, file says %d", path, typ, got, events[typ])
							}
						}
					}
					checked++
				}
				if checked == 0 {
					t.Fatal("no cgroup with memory figures")
				}
			}
		})
	}
}

// keyedFile parses a "key value" kernel file (independently of cgroupfs's parser).
func keyedFile(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	return out
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
