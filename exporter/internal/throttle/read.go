//go:build linux

package throttle

import (
	"os"
	"sync"
	"syscall"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
)

var statBufPool = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// readCPUStat reads one series' cpu.stat and, for a container whose crun subgroup has a
// quota, the subgroup's, whose throttling counters it merges (CPUStat.MaxThrottling; a
// subgroup that cannot be read leaves the scope's own).
func readCPUStat(s *Series) (cgroupfs.CPUStat, error) {
	st, err := readStatFile(s.path, s.fd)
	if err != nil || s.subPath == "" {
		return st, err
	}
	if sub, err := readStatFile(s.subPath, s.subFd); err == nil {
		st.MaxThrottling(sub)
	}
	return st, nil
}

// readStatFile reads a cpu.stat: pread on its descriptor, or open/read/close when fd < 0.
func readStatFile(path string, fd int) (cgroupfs.CPUStat, error) {
	var st cgroupfs.CPUStat
	bp := statBufPool.Get().(*[]byte)
	defer statBufPool.Put(bp)
	buf := *bp
	if fd < 0 {
		var err error
		if fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0); err != nil {
			return st, &os.PathError{Op: "open", Path: path, Err: err}
		}
		defer syscall.Close(fd)
	}
	n, err := syscall.Pread(fd, buf, 0)
	if err != nil {
		return st, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return st, cgroupfs.ParseCPUStat(buf[:n], &st)
}
