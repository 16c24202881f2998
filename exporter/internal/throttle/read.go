//go:build linux

package throttle

import (
	"os"
	"sync"
	"syscall"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
)

var statBufPool = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// readCPUStat reads one series' cpu.stat: pread on its descriptor, or open/read/close.
func readCPUStat(s *Series) (cgroupfs.CPUStat, error) {
	var st cgroupfs.CPUStat
	bp := statBufPool.Get().(*[]byte)
	defer statBufPool.Put(bp)
	buf := *bp
	fd := s.fd
	if fd < 0 {
		var err error
		if fd, err = syscall.Open(s.path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0); err != nil {
			return st, &os.PathError{Op: "open", Path: s.path, Err: err}
		}
		defer syscall.Close(fd)
	}
	n, err := syscall.Pread(fd, buf, 0)
	if err != nil {
		return st, &os.PathError{Op: "read", Path: s.path, Err: err}
	}
	return st, cgroupfs.ParseCPUStat(buf[:n], &st)
}
