//go:build linux

package cgroupfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// ErrParse marks a file whose content is not what the kernel writes.
var ErrParse = errors.New("malformed cgroup file")

// ErrWouldBlock marks a file that is not a regular kernel file (a FIFO or socket planted in a
// broken or hostile tree) or answered EAGAIN: reading it would block. Files are opened
// non-blocking, so such a file costs one failed read, never a blocked thread. It wraps
// procread.ErrTimeout: counted as reason "timeout".
var ErrWouldBlock = fmt.Errorf("%w: not a regular kernel file, reading it would block", procread.ErrTimeout)

// maxFileSize caps one control file read; cgroup control files are a few KiB at most
// (memory.stat on v2 is the largest, ~1.5 KiB).
const maxFileSize = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// readFile reads a small control file into a pooled buffer and passes it to parse. It uses
// raw open/read/close: os.Open adds fcntl and epoll calls (about 8 system calls per file on
// a VM) and os.ReadFile a stat and an allocation, which dominate a scrape of thousands of
// tiny files. A read shorter than the buffer is the end: control files are generated whole.
func readFile(path string, parse func([]byte) error) error {
	fd, err := openReadOnly(path)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	b := (*bp)[:0]
	for {
		if len(b) == cap(b) {
			if cap(b) >= maxFileSize {
				return fmt.Errorf("%s: %w: larger than %d bytes", path, ErrParse, maxFileSize)
			}
			b = append(b, 0)[:len(b)]
		}
		room := cap(b) - len(b)
		n, err := syscall.Read(fd, b[len(b):cap(b)])
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN || (err == nil && n == 0 && len(b) == 0 && !regular(fd)) {
			return &os.PathError{Op: "read", Path: path, Err: ErrWouldBlock}
		}
		if err != nil {
			return &os.PathError{Op: "read", Path: path, Err: err}
		}
		b = b[:len(b)+n]
		if n == 0 || n < room {
			break
		}
	}
	*bp = b
	if err := parse(b); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// openReadOnly opens a kernel file without blocking: O_NONBLOCK is ignored by cgroupfs,
// sysfs and procfs files, and makes the open (and reads) of a FIFO fail or return at once
// instead of waiting for a writer that never comes.
func openReadOnly(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// readAllCapped reads a file of unknown size (mountinfo) up to max bytes, non-blocking like
// readFile; a longer file is returned truncated with ErrTruncated.
func readAllCapped(path string, max int) ([]byte, error) {
	fd, err := openReadOnly(path)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	b := make([]byte, 0, 64<<10)
	for {
		if len(b) >= max {
			return b, fmt.Errorf("%s: %w (%d bytes)", path, ErrTruncated, max)
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := syscall.Read(fd, b[len(b):min(cap(b), max)])
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN || (err == nil && n == 0 && len(b) == 0 && !regular(fd)) {
			return nil, &os.PathError{Op: "read", Path: path, Err: ErrWouldBlock}
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// regular reports whether fd is a regular file (kernfs, sysfs and procfs files are). Only
// asked when a read returned nothing, so it costs no system call on the common path.
func regular(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG
}

// readUint reads a file holding one unsigned number.
func readUint(path string) (uint64, error) {
	var v uint64
	err := readFile(path, func(b []byte) (err error) {
		v, err = parseUint(bytes.TrimSpace(b))
		return err
	})
	return v, err
}

// readInt reads a file holding one signed number (cpu.cfs_quota_us is -1 when unlimited).
func readInt(path string) (int64, error) {
	var v int64
	err := readFile(path, func(b []byte) error {
		n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: %q is not a number", ErrParse, truncate(b))
		}
		v = n
		return nil
	})
	return v, err
}

func parseUint(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("%w: empty", ErrParse)
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: %q is not a number", ErrParse, truncate(b))
		}
		d := uint64(c - '0')
		if v > (^uint64(0)-d)/10 {
			return 0, fmt.Errorf("%w: %q overflows", ErrParse, truncate(b))
		}
		v = v*10 + d
	}
	return v, nil
}

// parseKeyed parses "key value" lines (cpu.stat, memory.stat, memory.events). A line that is
// not two fields with a number fails the whole file: a torn or foreign file must not yield
// plausible-looking partial numbers.
func parseKeyed(b []byte, visit func(key []byte, v uint64)) error {
	for line := range kernel.Lines(b) {
		if len(line) == 0 {
			continue
		}
		sp := bytes.IndexByte(line, ' ')
		if sp <= 0 {
			return fmt.Errorf("%w: line %q", ErrParse, truncate(line))
		}
		v, err := parseUint(line[sp+1:])
		if err != nil {
			return err
		}
		visit(line[:sp], v)
	}
	return nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// ErrorReason classifies a read error for the exporter's error counter:
// vanished (the cgroup or process went away, normal churn), permission, parse, timeout or io.
func ErrorReason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ESRCH), errors.Is(err, syscall.ENODEV):
		return "vanished"
	case errors.Is(err, os.ErrPermission), errors.Is(err, syscall.EPERM):
		return "permission"
	case errors.Is(err, ErrParse):
		return "parse"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, procread.ErrTimeout):
		return "timeout"
	default:
		return "io"
	}
}
