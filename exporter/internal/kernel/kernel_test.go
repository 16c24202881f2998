package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

func TestCountCPUList(t *testing.T) {
	for in, want := range map[string]int{
		"": 0, "0": 1, "0-3": 4, "0-3,8": 5, "0-3,8,10-11": 7, "0-1,1-2": 3, "0-63,64-127": 128, "1500": 1,
		"\t0-1\n": 2, "0-4194303": 1 << 22,
	} {
		if got, err := CountCPUList(in); err != nil || got != want {
			t.Errorf("CountCPUList(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"3-1", "a", "0-", ",", "0,,1", "-1", "0-99999999", "0-2147483647", "0-3,x"} {
		if n, err := CountCPUList(in); err == nil || !errors.Is(err, ErrCPUList) || n != 0 {
			t.Errorf("CountCPUList(%q) = %d, %v; want 0 and ErrCPUList", in, n, err)
		}
	}
}

func FuzzCountCPUList(f *testing.F) {
	for _, s := range []string{"0-1", "0-3,8,10-11", "", "3-1", "0-4194303", "1,2,3", "5-1,-,", "1023-1025"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n int
		var err error
		testutil.AllocBound(t, 16<<10, func() { n, err = CountCPUList(s) })
		if n < 0 || n > maxCPUs || (err != nil && n != 0) {
			t.Fatalf("CountCPUList(%q) = %d, %v", s, n, err)
		}
	})
}

func TestLines(t *testing.T) {
	for in, want := range map[string][]string{"": nil, "a": {"a"}, "a\n": {"a"}, "a\n\nb": {"a", "", "b"}} {
		var got []string
		for l := range Lines([]byte(in)) {
			got = append(got, string(l))
		}
		if !slices.Equal(got, want) {
			t.Errorf("Lines(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestVanished(t *testing.T) {
	if err := Vanished(fmt.Errorf("read: %w", syscall.ESRCH)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ESRCH: %v", err)
	}
	if err := Vanished(os.ErrPermission); errors.Is(err, os.ErrNotExist) {
		t.Errorf("EPERM became not-exist")
	}
	if Vanished(nil) != nil {
		t.Error("nil")
	}
}

func TestBootTime(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "stat"), []byte("cpu 1 2 3\nbtime 1600000000\nprocesses 5\n"), 0o644)
	if bt, err := BootTime(dir); err != nil || bt != 1600000000 {
		t.Errorf("BootTime = %v, %v", bt, err)
	}
	os.WriteFile(filepath.Join(dir, "stat"), []byte("cpu 1 2 3\n"), 0o644)
	if _, err := BootTime(dir); err == nil {
		t.Error("no btime: no error")
	}
	if bt, err := BootTime("/proc"); err != nil || bt < 1e9 {
		t.Errorf("real /proc: %v, %v", bt, err)
	}
}

func TestParseStartTicks(t *testing.T) {
	for _, c := range []struct {
		line string
		want uint64
		ok   bool
	}{
		{"1234 (sleep) S 1 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 98765 2400000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n", 98765, true},
		{"7 (a) b) c) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0 0\n", 42, true},
		{"7 (x) S 1 2", 0, false},
		{"7 (x) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4x2 0", 0, false},
		{"no comm", 0, false},
	} {
		got, err := ParseStartTicks([]byte(c.line))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseStartTicks(%q) = %d, %v", c.line, got, err)
		}
	}
	self, err := StartTicks("/proc", os.Getpid())
	if err != nil || self == 0 {
		t.Fatalf("own start time: %d, %v", self, err)
	}
	if _, err := StartTicks("/proc", 1<<30); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a PID that does not exist: %v", err)
	}
}

func FuzzParseStartTicks(f *testing.F) {
	f.Add([]byte("1234 (sleep) S 1 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 98765 2400000"))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = ParseStartTicks(b) })
}

// The kernel's uptime (CLOCK_BOOTTIME) in ticks is at least every running process's start
// time: the walk's listing time compared with start times tells a reused PID.
func TestUptimeTicksAtLeastStartTicks(t *testing.T) {
	up, err := UptimeTicks("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self, err := StartTicks("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self > up || up-self > 3600*UserHZ*24*365 {
		t.Errorf("uptime %d ticks, this process started at %d", up, self)
	}
	for _, bad := range []string{"", "12", "12.3 4", "x.00 1", "12.345 1", "-1.00 0"} {
		if _, err := ParseUptimeTicks([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if got, _ := ParseUptimeTicks([]byte("38060.83 18899.30\n")); got != 3806083 {
		t.Errorf("38060.83 s: %d ticks", got)
	}
}
