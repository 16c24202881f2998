package v2

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/test/internal/cgtree"
	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// The VM's own cgroup files become a committed fixture host of the collector's unit tests
// (exporter/collector/testdata/hosts/v2-vm-kubernetes), so that at least one v2 tree has the
// kernel's real keys, formats and figures rather than package fixture's. `make fixtures-v2`
// rewrites it (QUOTA_V2_FIXTURE_UPDATE=1); every run of the v2 suite checks that the
// committed tree still has the VM's set of files and their formats.
const fixtureUpdateEnv = "QUOTA_V2_FIXTURE_UPDATE"

func fixtureDir(name string) string {
	return filepath.Join(testenv.RepoRoot(), "exporter", "collector", "testdata", "hosts", name)
}

// vmFixture turns the frozen dump (files-before) and the VM's mountinfo into the fixture's
// files by path under the tree root (cgtree.Host); pod UIDs and container ids are the
// scenario's fixed ones.
func vmFixture(files kernel, mountinfo string) map[string]string {
	return cgtree.Host(cgtree.Files(files), mountinfo)
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out, err := cgtree.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The committed VM fixture has exactly the VM's files, each of the same format: a kernel
// or scenario change that adds, drops or reshapes a file fails here until `make
// fixtures-v2` regenerates the tree (and the collector's golden file with it).
func TestFixtureMatchesVM(t *testing.T) {
	r := load(t)
	got := vmFixture(r.before, r.res.Section("mountinfo"))
	dir := fixtureDir("v2-vm-kubernetes")
	if os.Getenv(fixtureUpdateEnv) == "1" {
		if err := cgtree.Write(dir, got); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d files to %s", len(got), dir)
	}
	for _, d := range cgtree.Diff(got, readTree(t, dir)) {
		t.Errorf("%s (make fixtures-v2)", d)
	}
	t.Logf("%d files of the VM's v2 tree, as committed in %s", len(got), dir)
}

// lineKeys are a keyed file's keys in order (the first field of each line).
func lineKeys(content string) string {
	var keys []string
	for _, line := range strings.Split(strings.TrimSpace(content), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			keys = append(keys, f[0])
		}
	}
	return strings.Join(keys, " ")
}

// The hand-written v2 host of the unit tests (package fixture's writer) uses the kernel's
// keys in the kernel's order for every keyed file: the keys it shares with the same file of
// a VM cgroup at the same level (the root's files differ from the others') come in the
// same order, and the keys the exporter reads are in both. It may leave keys out, and it
// has a few this kernel lacks (core_sched.force_idle_usec needs CONFIG_SCHED_CORE, zswap
// and zswapped CONFIG_ZSWAP in memory.stat): those are logged.
func TestHandWrittenFixtureKeys(t *testing.T) {
	r := load(t)
	vmKeys := map[string][]string{} // "root|file" or "child|file" -> the keys of one such file
	for k, content := range r.before {
		level := "child"
		if strings.HasPrefix(k, "./") {
			level = "root"
		}
		vmKeys[level+"|"+filepath.Base(k)] = strings.Fields(lineKeys(content))
	}
	read := map[string][]string{
		"cpu.stat":        {"usage_usec", "user_usec", "system_usec", "nr_periods", "nr_throttled", "throttled_usec", "nr_bursts", "burst_usec"},
		"memory.stat":     {"anon", "file", "kernel", "sock", "shmem", "anon_thp", "inactive_file"},
		"memory.events":   {"high", "max", "oom", "oom_kill", "oom_group_kill"},
		"cpu.pressure":    {"some", "full"},
		"memory.pressure": {"some", "full"},
	}
	hand := readTree(t, fixtureDir("v2-systemd-kubernetes"))
	checked, extra := 0, map[string]bool{}
	for rel, content := range hand {
		name := filepath.Base(rel)
		if read[name] == nil {
			continue
		}
		level := "child"
		if filepath.Dir(rel) == filepath.Join("sys", "fs", "cgroup") {
			level = "root"
		}
		vm, ok := vmKeys[level+"|"+name]
		if !ok {
			continue
		}
		checked++
		in := map[string]bool{}
		for _, k := range vm {
			in[k] = true
		}
		var common []string
		for _, k := range strings.Fields(lineKeys(content)) {
			if in[k] {
				common = append(common, k)
			} else {
				extra[name+" "+k] = true
			}
		}
		if !subsequence(common, vm) {
			t.Errorf("%s: keys %q are not in the kernel's order %q", rel, common, vm)
		}
		for _, k := range read[name] {
			if in[k] && !slices.Contains(common, k) && (level == "child" || name != "cpu.stat") {
				t.Errorf("%s: no %s, which the kernel has and the exporter reads", rel, k)
			}
		}
	}
	t.Logf("%d keyed files of the hand-written v2 host checked against the VM's; keys this kernel lacks: %v", checked, slices.Sorted(maps.Keys(extra)))
}

// subsequence reports whether every element of a appears in b, in the same order.
func subsequence(a, b []string) bool {
	i := 0
	for _, x := range b {
		if i < len(a) && a[i] == x {
			i++
		}
	}
	return i == len(a)
}
