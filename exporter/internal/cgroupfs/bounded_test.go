//go:build linux

package cgroupfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

func TestReadProcsStreamsAndCaps(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1\n22\nx9\n333\n\n4444")
	pids, err := ReadProcs(dir)
	if err != nil || len(pids) != 4 || pids[0] != 1 || pids[3] != 4444 {
		t.Fatalf("got %v, %v", pids, err)
	}
	write(strings.Repeat("4194303\n", MaxProcs+10))
	pids, err = ReadProcs(dir)
	if !errors.Is(err, ErrTruncated) || !errors.Is(err, ErrParse) || len(pids) != MaxProcs {
		t.Fatalf("over the cap: %d PIDs, %v", len(pids), err)
	}
}

// A FIFO in place of any file cgroupfs reads returns ErrWouldBlock at once (a timeout).
func TestFIFOsDoNotBlock(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"cgroup.procs", "cpu.max", "cpu.stat", "memory.max"} {
		if err := syscall.Mkfifo(filepath.Join(dir, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrWouldBlock) || !errors.Is(err, procread.ErrTimeout) || ErrorReason(err) != "timeout" {
			t.Errorf("%s: want ErrWouldBlock, got %v", what, err)
		}
	}
	_, err := ReadProcs(dir)
	check("ReadProcs", err)
	_, err = HasProcs(dir)
	check("HasProcs", err)
	_, err = readCPUMaxV2(dir)
	check("cpu.max", err)
	_, err = ReadCPUStat(dir)
	check("cpu.stat", err)
	_, err = readMemoryMaxV2(dir)
	check("memory.max", err)
	_, err = readAllCapped(filepath.Join(dir, "cpu.stat"), 1<<20)
	check("readAllCapped", err)
}

func FuzzReadProcs(f *testing.F) {
	for _, s := range []string{"1\n2\n", "", "\n\n", "12a\n3\n", "99999999999999999999\n5", "-1\n0\n7"} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		var pids []int
		var err error
		testutil.AllocBound(t, 2*8*MaxProcs+64<<10, func() { pids, err = ReadProcs(dir) })
		if err != nil && !errors.Is(err, ErrTruncated) {
			t.Fatalf("unexpected error %v", err)
		}
		for _, p := range pids {
			if p <= 0 || p >= 1<<31 {
				t.Fatalf("bad PID %d from %q", p, b)
			}
		}
	})
}
