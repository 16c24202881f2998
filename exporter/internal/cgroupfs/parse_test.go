package cgroupfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

func writeTemp(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadCPUStat(t *testing.T) {
	dir := writeTemp(t, map[string]string{"cpu.stat": "nr_periods 36\nnr_throttled 36\nthrottled_time 6420577432\nnr_bursts 0\nburst_time 0\n"})
	s, err := ReadCPUStat(dir)
	if err != nil || !s.HasThrottling || s.Periods != 36 || s.ThrottledPeriods != 36 || s.ThrottledSeconds != 6.420577432 {
		t.Fatalf("v1: %+v %v", s, err)
	}
	// v2 without the cpu controller: usage only.
	dir = writeTemp(t, map[string]string{"cpu.stat": "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n"})
	s, err = ReadCPUStat(dir)
	if err != nil || s.HasThrottling || !s.HasUsage || s.UserSeconds != 0.001 || s.SystemSeconds != 0.0005 {
		t.Fatalf("v2 usage only: %+v %v", s, err)
	}
}

func TestMalformedFiles(t *testing.T) {
	bad := []struct{ file, content string }{
		{"cpu.stat", "nr_periods 36\nnr_throttled\n"},                    // truncated mid-line
		{"cpu.stat", "nr_periods 36\nnr_throttled -1\n"},                 // negative
		{"cpu.stat", "nr_periods 3\nnr_throttled 5\nthrottled_time 1\n"}, // impossible
		{"cpu.stat", "nr_periods 99999999999999999999999\n"},             // overflow
		{"cpu.stat", "\x00\x00\x00"},
		{"cpu.max", "20000\n"},
		{"cpu.max", "max max\n"},
		{"cpu.max", ""},
		{"memory.stat", "anon 1\nfile\n"},
		{"cpu.pressure", "some avg10=0.00 avg60=0.00\n"},
		{"cpu.pressure", "some total=abc\n"},
		{"cpu.cfs_quota_us", "lots\n"},
	}
	for _, b := range bad {
		dir := writeTemp(t, map[string]string{b.file: b.content, "cpu.cfs_period_us": "100000\n"})
		var err error
		switch b.file {
		case "cpu.stat":
			_, err = ReadCPUStat(dir)
		case "cpu.max":
			_, err = readCPUMaxV2(dir)
		case "memory.stat":
			err = readFile(filepath.Join(dir, b.file), func(x []byte) error { return parseKeyed(x, func([]byte, uint64) {}) })
		case "cpu.pressure":
			_, err = ReadPSIFile(dir, "cpu")
		case "cpu.cfs_quota_us":
			_, err = readCPUMaxV1(dir)
		}
		if !errors.Is(err, ErrParse) || ErrorReason(err) != "parse" {
			t.Errorf("%s %q: err = %v, want a parse error", b.file, b.content, err)
		}
		if err != nil && !strings.Contains(err.Error(), b.file) {
			t.Errorf("error %q does not name the file", err)
		}
	}
	_, err := ReadCPUStat(filepath.Join(t.TempDir(), "gone"))
	if ErrorReason(err) != "vanished" {
		t.Errorf("missing cgroup: reason %q", ErrorReason(err))
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string]int{"": 0, "0": 1, "0-3": 4, "0-3,8": 5, "0-1,1-2": 3, "0-63,64-127": 128, "1500": 1} {
		if got, err := ParseCPUList(in); err != nil || got != want {
			t.Errorf("ParseCPUList(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"3-1", "a", "0-", ",", "0-99999999"} {
		if _, err := ParseCPUList(in); err == nil {
			t.Errorf("ParseCPUList(%q): no error", in)
		}
	}
}

func TestSharesToWeight(t *testing.T) {
	for shares, want := range map[uint64]uint64{2: 1, 1024: 39, 262144: 10000, 0: 1, 512: 20, 2048: 79} {
		if got := SharesToWeight(shares); got != want {
			t.Errorf("SharesToWeight(%d) = %d, want %d", shares, got, want)
		}
	}
}

func TestParseMountInfo(t *testing.T) {
	in := strings.Join([]string{
		"31 23 0:28 / /sys/fs/cgroup rw,relatime shared:2 - tmpfs tmpfs rw,mode=755",
		"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:3 - cgroup cgroup rw,cpu,cpuacct",
		"33 31 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory",
		"this line is garbage",
		"34 31 0:31 /.. /host/sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate",
		"35 31 0:32 / /mnt/with\\040space rw - cgroup cgroup rw,name=systemd",
		"36 31 0:33 / /sys/fs/cgroup/pids rw -", // truncated
	}, "\n")
	mounts, malformed := ParseMountInfo([]byte(in))
	if malformed != 2 {
		t.Errorf("malformed = %d, want 2", malformed)
	}
	if len(mounts) != 4 {
		t.Fatalf("mounts = %+v", mounts)
	}
	if got := strings.Join(mounts[0].Controllers, ","); got != "cpu,cpuacct" {
		t.Errorf("controllers %q", got)
	}
	if mounts[3].MountPoint != "/mnt/with space" {
		t.Errorf("unescape: %q", mounts[3].MountPoint)
	}
	l := LayoutFromMounts(mounts, "/sys/fs/cgroup")
	if l.Mode != "hybrid" || l.CPU == nil || l.CPU != l.CPUAcct && l.CPU.MountPoint != l.CPUAcct.MountPoint || !l.OutsideNamespace {
		t.Errorf("layout %s outside=%v", l, l.OutsideNamespace)
	}
}

// A host /sys/fs/cgroup mounted into a container shows as lying outside the exporter's
// cgroup namespace; its tree is the host's, so paths are taken from the mount point down.
func TestHierarchyPaths(t *testing.T) {
	h := &Hierarchy{Version: 2, MountPoint: "/host/sys/fs/cgroup", root: normalRoot("/../../..")}
	if got := h.Path("/host/sys/fs/cgroup/kubepods.slice/x.scope"); got != "/kubepods.slice/x.scope" {
		t.Errorf("Path = %q", got)
	}
	if got := h.Dir("/kubepods.slice"); got != "/host/sys/fs/cgroup/kubepods.slice" {
		t.Errorf("Dir = %q", got)
	}
	sub := &Hierarchy{Version: 1, MountPoint: "/sys/fs/cgroup/cpu", root: normalRoot("/docker/abc")}
	if got := sub.Path("/sys/fs/cgroup/cpu"); got != "/docker/abc" {
		t.Errorf("Path of a subtree mount = %q", got)
	}
	if got := sub.Dir("/docker/abcdef"); got != "" {
		t.Errorf("Dir outside the mounted subtree = %q, want empty", got)
	}
}

// Allocation bounds of the fuzz targets: the parsers of small kernel files allocate next to
// nothing. Mount info is the exporter's own (/proc/self/mountinfo), read once at start:
// its parse keeps a Mount per line, so it is bounded for inputs up to maxFuzzMountInfo.
const (
	smallParseAlloc   = 16 << 10
	maxFuzzMountInfo  = 64 << 10
	maxMountInfoAlloc = 8 * maxFuzzMountInfo
)

func FuzzParseCPUStat(f *testing.F) {
	f.Add([]byte("nr_periods 36\nnr_throttled 36\nthrottled_time 6420577432\nnr_bursts 0\nburst_time 0\n"))
	f.Add([]byte("usage_usec 1\nuser_usec 1\nsystem_usec 0\nnr_periods 1\nnr_throttled 0\nthrottled_usec 0\n"))
	f.Add([]byte("nr_periods\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s CPUStat
		var err error
		testutil.AllocBound(t, smallParseAlloc, func() { err = ParseCPUStat(b, &s) })
		if err == nil && s.HasThrottling && s.ThrottledPeriods > s.Periods {
			t.Errorf("accepted nr_throttled > nr_periods: %+v", s)
		}
	})
}

func FuzzParsePSI(f *testing.F) {
	f.Add([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=3897704\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"))
	f.Add([]byte("some total=\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p PSI
		var err error
		testutil.AllocBound(t, smallParseAlloc, func() { err = parsePSI(b, &p) })
		if err == nil && (p.SomeSeconds < 0 || p.FullSeconds < 0) {
			t.Errorf("negative PSI %+v", p)
		}
	})
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add([]byte("32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:3 - cgroup cgroup rw,cpu,cpuacct\n"))
	f.Add([]byte("34 31 0:31 /.. /x\\040y rw - cgroup2 cgroup2 rw\n - \n\\"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzMountInfo {
			return
		}
		var mounts []Mount
		testutil.AllocBound(t, maxMountInfoAlloc, func() { mounts, _ = ParseMountInfo(b) })
		l := LayoutFromMounts(mounts, "/sys/fs/cgroup")
		for _, h := range []*Hierarchy{l.CPU, l.Memory} {
			if h != nil {
				_ = h.Dir("/a/b")
				_ = h.Path(h.MountPoint + "/a")
			}
		}
	})
}

func FuzzParseKeyed(f *testing.F) {
	f.Add([]byte("anon 1\nfile 2\ninactive_file 3\n"))
	f.Add([]byte("total_rss 1\n\n\nx"))
	f.Fuzz(func(t *testing.T, b []byte) {
		testutil.AllocBound(t, smallParseAlloc, func() { _ = parseKeyed(b, func([]byte, uint64) {}) })
	})
}

func FuzzParseCPUList(f *testing.F) {
	f.Add("0-3,8")
	f.Add("0-4294967295")
	f.Fuzz(func(t *testing.T, s string) {
		var n int
		var err error
		testutil.AllocBound(t, smallParseAlloc, func() { n, err = ParseCPUList(s) })
		if err == nil && n < 0 {
			t.Errorf("negative count")
		}
	})
}
