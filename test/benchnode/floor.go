package benchnode

import (
	"errors"
	"path/filepath"
	"runtime"
	"sort"
	"syscall"
	"time"
	"unsafe"
)

// The floor is the CPU time of only opening and reading, once, the kernel files a scrape of
// this node needs, with the leanest system calls (open, one read into a reused buffer,
// close; getdents for the walks), on one locked thread, measured with CLOCK_THREAD_CPUTIME_ID. It is
// what no exporter reading these files can beat; the ratio to it is the exporter's overhead.
//
// The files are those the current exporter reads for a cgroup (cgroupfs and the cpu,
// memory and process collectors). v1: discovery's cgroup.procs, quota, period and memory
// limit, the cpu collector's cpu.stat and cpuacct.stat, the memory collector's usage,
// memory.stat and memory.oom_control. v2: cgroup.procs, cpu.max, cpu.stat, cpu.pressure,
// memory.max, memory.current, memory.stat, memory.events, memory.pressure. And stat and
// status of every process. Settings cached for 30 s (shares or weight, burst, cpuset) are
// left out.
var (
	floorFilesV1 = map[string][]string{
		"cpu":     {"cgroup.procs", "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.stat"},
		"cpuacct": {"cpuacct.stat"},
		"memory":  {"memory.limit_in_bytes", "memory.usage_in_bytes", "memory.stat", "memory.oom_control"},
	}
	floorFilesV2 = map[string][]string{
		"unified": {"cgroup.procs", "cpu.max", "cpu.stat", "cpu.pressure",
			"memory.max", "memory.current", "memory.stat", "memory.events", "memory.pressure"},
	}
	floorProcFiles = []string{"stat", "status"}
)

func floorFiles() map[string][]string {
	if Unified() {
		return floorFilesV2
	}
	return floorFilesV1
}

// Floor is the read floor of one scrape and of one sampler window, in CPU milliseconds
// (median of Repeats runs).
type Floor struct {
	Repeats           int
	Dirs, Processes   int
	Files             int     // files read per scrape floor
	ScrapeCPUMS       float64 // walk + every file once
	ScrapeWallMS      float64
	QuotaCgroups      int
	SamplerPreadCPUMS float64 // pread of every open cpu.stat of a cgroup with a quota, once
	SamplerOpenCPUMS  float64 // open, read, close of the same files, once
}

// MeasureFloor runs the floors repeats times and keeps the medians.
func MeasureFloor(repeats int) (*Floor, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f := &Floor{Repeats: repeats}
	var scrape, wall, pread, open []float64
	buf := make([]byte, 64<<10)
	for range repeats {
		c0, w0 := threadCPU(), time.Now()
		dirs, files, procs, err := readOnce(buf)
		c1, w1 := threadCPU(), time.Now()
		if err != nil {
			return nil, err
		}
		scrape = append(scrape, float64(c1-c0)/1e6)
		wall = append(wall, float64(w1.Sub(w0))/1e6)
		f.Dirs, f.Files, f.Processes = dirs, files, procs
	}
	// The sampler's floor: cpu.stat of every cgroup with a quota, kept open.
	paths := quotaCPUStats(buf)
	f.QuotaCgroups = len(paths)
	fds := make([]int, 0, len(paths))
	for _, p := range paths {
		if fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err == nil {
			fds = append(fds, fd)
		}
	}
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	for range repeats {
		c0 := threadCPU()
		for _, fd := range fds {
			_, _ = syscall.Pread(fd, buf, 0)
		}
		c1 := threadCPU()
		for _, p := range paths {
			readFile(p, buf)
		}
		c2 := threadCPU()
		pread = append(pread, float64(c1-c0)/1e6)
		open = append(open, float64(c2-c1)/1e6)
	}
	f.ScrapeCPUMS, f.ScrapeWallMS = median(scrape), median(wall)
	f.SamplerPreadCPUMS, f.SamplerOpenCPUMS = median(pread), median(open)
	return f, nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// threadCPU is this thread's CPU time in nanoseconds: CLOCK_THREAD_CPUTIME_ID is exact,
// where getrusage(RUSAGE_THREAD) on this kernel moves in scheduler ticks.
func threadCPU() int64 {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	_, _, _ = syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// readOnce walks the hierarchies (three on v1, one on v2) and /proc and reads every floor file once.
func readOnce(buf []byte) (dirs, files, procs int, err error) {
	for ctl, names := range floorFiles() {
		var walk func(dir string) error
		walk = func(dir string) error {
			dirs++
			for _, n := range names {
				if readFile(filepath.Join(dir, n), buf) {
					files++
				}
			}
			subs, err := subdirs(dir, buf)
			if err != nil {
				return err
			}
			for _, s := range subs {
				if err := walk(filepath.Join(dir, s)); err != nil {
					return err
				}
			}
			return nil
		}
		if err := walk(Dir(ctl, "")); err != nil {
			return 0, 0, 0, err
		}
	}
	pids, err := subdirs("/proc", buf)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, p := range pids {
		if p[0] < '0' || p[0] > '9' {
			continue
		}
		procs++
		for _, n := range floorProcFiles {
			if readFile("/proc/"+p+"/"+n, buf) {
				files++
			}
		}
	}
	return dirs, files, procs, nil
}

// readFile opens, reads once and closes; false when the file could not be read.
func readFile(path string, buf []byte) bool {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	_, err = syscall.Read(fd, buf)
	syscall.Close(fd)
	return err == nil
}

// subdirs lists a directory's subdirectories with getdents (d_type, no stat). It repeats the
// exporter's cgroupfs walk on purpose: that package is internal to the exporter module, and
// the floor must not move when the exporter's code does.
func subdirs(dir string, buf []byte) ([]string, error) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil, nil
		}
		return nil, err
	}
	defer syscall.Close(fd)
	var out []string
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		for off := 0; off < n; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := int(*(*uint16)(unsafe.Pointer(&buf[off+16])))
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			if typ == syscall.DT_DIR && string(name) != "." && string(name) != ".." {
				out = append(out, string(name))
			}
			off += reclen
		}
	}
}

// quotaCPUStats lists cpu.stat of every cgroup in the cpu hierarchy with a quota (v1: a
// cpu.cfs_quota_us other than -1; v2: a cpu.max other than "max ...").
func quotaCPUStats(buf []byte) []string {
	quotaFile := "cpu.cfs_quota_us"
	if Unified() {
		quotaFile = "cpu.max"
	}
	var out []string
	var walk func(dir string)
	walk = func(dir string) {
		fd, err := syscall.Open(filepath.Join(dir, quotaFile), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err == nil {
			n, _ := syscall.Read(fd, buf)
			syscall.Close(fd)
			if n > 0 && buf[0] != '-' && buf[0] != 'm' {
				out = append(out, filepath.Join(dir, "cpu.stat"))
			}
		}
		subs, _ := subdirs(dir, buf)
		for _, s := range subs {
			walk(filepath.Join(dir, s))
		}
	}
	walk(Dir("cpu", ""))
	return out
}
