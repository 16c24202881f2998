//go:build linux

package cgroupfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// MaxProcs caps the PIDs ReadProcs returns: more than any real cgroup holds (the kernel's
// threads-max is lower on any host this runs on), few enough that a bogus or hostile
// cgroup.procs costs at most 2 MiB of PIDs and a 64 KiB buffer.
const MaxProcs = 1 << 18

// ErrTruncated marks a file longer than the exporter reads; it wraps ErrParse.
var ErrTruncated = fmt.Errorf("%w: longer than the read cap", ErrParse)

// procsBuffers recycles ReadProcs' read buffers: discovery lists every cgroup's cgroup.procs,
// and a fresh 64 KiB buffer each was most of a walk's garbage at 1 000 cgroups.
var procsBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// ReadProcs lists the PIDs in a cgroup's cgroup.procs (in the exporter's PID namespace). It
// streams the file; past MaxProcs PIDs it stops and returns them with ErrTruncated.
func ReadProcs(dir string) ([]int, error) {
	path := filepath.Join(dir, "cgroup.procs")
	fd, err := openReadOnly(path)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	bp := procsBuffers.Get().(*[]byte)
	defer procsBuffers.Put(bp)
	buf := *bp
	var pids []int
	pid, digits, bad := 0, 0, false
	for total := 0; ; {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN || (err == nil && n == 0 && total == 0 && !regular(fd)) {
			return nil, &os.PathError{Op: "read", Path: path, Err: ErrWouldBlock}
		}
		if err != nil {
			return pids, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		total += n
		for _, c := range buf[:n] {
			switch {
			case c >= '0' && c <= '9':
				if pid < 1<<31 {
					pid = pid*10 + int(c-'0')
				}
				digits++
			case c == '\n':
				if digits > 0 && !bad && pid > 0 && pid < 1<<31 {
					if len(pids) == MaxProcs {
						return pids, fmt.Errorf("%s: %w (%d PIDs)", path, ErrTruncated, MaxProcs)
					}
					pids = append(pids, pid)
				}
				pid, digits, bad = 0, 0, false
			default:
				bad = true
			}
		}
	}
	if digits > 0 && !bad && pid > 0 && pid < 1<<31 && len(pids) < MaxProcs {
		pids = append(pids, pid)
	}
	return pids, nil
}

// HasProcs reports whether cgroup.procs lists any process; it reads only the first bytes
// (the root cgroup may list every process of the host).
func HasProcs(dir string) (bool, error) {
	path := filepath.Join(dir, "cgroup.procs")
	fd, err := openReadOnly(path)
	if err != nil {
		return false, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var b [16]byte
	n, err := syscall.Read(fd, b[:])
	if err == syscall.EAGAIN || (n <= 0 && !regular(fd)) {
		return false, &os.PathError{Op: "read", Path: path, Err: ErrWouldBlock}
	}
	return n > 0, nil
}
