// Package kernel holds the facts about Linux's file interfaces that several readers share,
// each written once: the clock-tick unit, the boot time, CPU lists, the error a vanished
// process gives, and line splitting of /proc and cgroup files.
package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// UserHZ is the unit of the tick counts in /proc/<pid>/stat (utime, stime, starttime) and
// v1 cpuacct.stat: sysconf(_SC_CLK_TCK), 100 on every architecture Go runs Linux on (procfs
// assumes the same).
const UserHZ = 100

// ErrCPUList marks a malformed CPU list.
var ErrCPUList = errors.New("malformed cpu list")

// maxCPUs bounds a list's count far beyond any kernel's NR_CPUS, so a torn or hostile list
// cannot claim billions of CPUs (or make the count loop long).
const maxCPUs = 1 << 22

// CountCPUList counts the CPUs in a kernel CPU list such as "0-3,8,10-11" (cpuset.cpus,
// Cpus_allowed_list, /sys/devices/system/cpu/online). Surrounding white space is ignored and
// the empty list counts 0. Any malformed part (empty, not a number, a reversed range) or a
// count above 4194304 makes the whole list an error wrapping ErrCPUList: a partial count
// would look plausible and be wrong. CPUs listed twice count once below CPU 1024.
func CountCPUList(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	var seen [16]uint64 // CPUs 0..1023; larger ids are counted without dedup
	n := 0
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpuNumber(lo)
		if err != nil {
			return 0, cpuListError(part)
		}
		b := a
		if isRange {
			if b, err = cpuNumber(hi); err != nil || b < a {
				return 0, cpuListError(part)
			}
		}
		for c := a; c <= b && c < 1024; c++ {
			if seen[c/64]&(1<<(c%64)) == 0 {
				seen[c/64] |= 1 << (c % 64)
				n++
			}
		}
		if b >= 1024 {
			n += int(b - max(a, 1024) + 1)
		}
		if n > maxCPUs {
			return 0, fmt.Errorf("%w: more than %d CPUs", ErrCPUList, maxCPUs)
		}
	}
	return n, nil
}

// OnlineCPUs counts the host's online CPUs (<sysfs>/devices/system/cpu/online): what glibc
// sizes its arena limit by, whatever the cgroup's quota or cpuset.
func OnlineCPUs(sysfs string) (int, error) {
	b, err := os.ReadFile(filepath.Join(sysfs, "devices", "system", "cpu", "online"))
	if err != nil {
		return 0, err
	}
	return CountCPUList(string(b))
}

// cpuNumber parses a CPU number; longer strings are refused before strconv, whose errors
// hold a copy of their input.
func cpuNumber(s string) (uint64, error) {
	if len(s) > 10 {
		return 0, ErrCPUList
	}
	return strconv.ParseUint(s, 10, 31)
}

// cpuListError names the malformed part of a list, at most its first 32 bytes.
func cpuListError(part string) error {
	return fmt.Errorf("%w: %q", ErrCPUList, part[:min(len(part), 32)])
}

// Vanished makes the errors of a process that went away match os.ErrNotExist: reads of
// /proc/<pid> files of an exiting process (and opening mem of a zombie) fail with ESRCH
// rather than ENOENT.
func Vanished(err error) error {
	if err != nil && errors.Is(err, syscall.ESRCH) && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %w", os.ErrNotExist, err)
	}
	return err
}

// Lines yields the lines of b without their '\n'; a final line without one is yielded too,
// an empty b yields nothing. The lines alias b.
func Lines(b []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for len(b) > 0 {
			line := b
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				line, b = b[:i], b[i+1:]
			} else {
				b = nil
			}
			if !yield(line) {
				return
			}
		}
	}
}

// BootTime reads the boot time (btime of <procfs>/stat) in seconds since the epoch. Start
// times in /proc/<pid>/stat are ticks since boot; add StartTicks/UserHZ to this.
func BootTime(procfs string) (float64, error) {
	b, err := os.ReadFile(filepath.Join(procfs, "stat"))
	if err != nil {
		return 0, fmt.Errorf("boot time: %w", err)
	}
	for line := range Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 63)
			if err != nil || n == 0 {
				return 0, fmt.Errorf("boot time: btime %q in %s/stat", v, procfs)
			}
			return float64(n), nil
		}
	}
	return 0, fmt.Errorf("boot time: no btime in %s/stat", procfs)
}

// UptimeTicks reads the time since boot (<procfs>/uptime, CLOCK_BOOTTIME, the clock of
// start times in /proc/<pid>/stat) in clock ticks, rounded down as the kernel rounds start
// times: a process that started before the read has a start time at most this.
func UptimeTicks(procfs string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(procfs, "uptime"))
	if err != nil {
		return 0, fmt.Errorf("uptime: %w", err)
	}
	return ParseUptimeTicks(b)
}

// ParseUptimeTicks parses the first field of /proc/uptime ("38060.83 18899.30\n").
func ParseUptimeTicks(b []byte) (uint64, error) {
	first, _, _ := bytes.Cut(b, []byte(" "))
	secs, frac, ok := bytes.Cut(first, []byte("."))
	s, err1 := strconv.ParseUint(string(secs), 10, 40)
	c, err2 := strconv.ParseUint(string(frac), 10, 8)
	if !ok || len(frac) != 2 || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("uptime: malformed %q", b[:min(len(b), 64)])
	}
	return s*UserHZ + c*UserHZ/100, nil
}

// ErrPIDReused is a process whose PID now belongs to another process (its start time
// differs): what was read by that PID is the other process's. It wraps os.ErrNotExist: the
// process read is gone.
var ErrPIDReused = fmt.Errorf("%w: the PID now belongs to another process", os.ErrNotExist)

// StartTicks reads the start time (field 22 of <procfs>/<pid>/stat, clock ticks since boot)
// of a process, to tell it from a later process with the same PID. It reads into a buffer
// on the stack and allocates nothing but the path.
func StartTicks(procfs string, pid int) (uint64, error) {
	f, err := os.Open(procfs + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, Vanished(err)
	}
	defer f.Close()
	var buf [1024]byte // a stat line is at most ~700 bytes
	n, err := f.Read(buf[:])
	if err != nil {
		return 0, Vanished(err)
	}
	return ParseStartTicks(buf[:n])
}

// ParseStartTicks parses the start time out of a /proc/<pid>/stat line: the 20th field after
// the comm's closing parenthesis (the comm may hold spaces and parentheses).
func ParseStartTicks(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no comm")
	}
	field := 0
	for j := i + 1; j < len(b); {
		for j < len(b) && b[j] == ' ' {
			j++
		}
		k := j
		for k < len(b) && b[k] != ' ' && b[k] != '\n' {
			k++
		}
		if k == j {
			break
		}
		if field++; field == 20 {
			var v uint64
			for _, c := range b[j:k] {
				if c < '0' || c > '9' || v > (1<<63)/10 {
					return 0, fmt.Errorf("stat: start time %q", b[j:k])
				}
				v = v*10 + uint64(c-'0')
			}
			return v, nil
		}
		j = k
	}
	return 0, fmt.Errorf("stat: %d fields after the comm", field)
}
