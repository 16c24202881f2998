//go:build linux

// Package procroot opens files below a process's root (/proc/<pid>/root) the way that process
// sees them, and nothing else. Everything there belongs to a tenant, and the exporter reads it
// as root: a symlink, absolute or relative, at any component must not lead the walk out of the
// tenant's root (into the exporter's own filesystem, which holds the host's / and /proc), a
// FIFO must not block the reader, and a device node must not even be opened.
//
// How (the way runc and containerd resolve container paths):
//   - the root is an O_PATH descriptor of /proc/<pid>/root, opened once per Open;
//   - names are resolved inside it with chroot semantics by cyphar/filepath-securejoin's
//     pathrs-lite (openat2 with RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS, or a checked userspace
//     walk on kernels before 5.6): absolute symlinks and ".." stay inside the root, magic links
//     (/proc/self/root, ...) are refused;
//   - what is resolved is an O_PATH handle: fstat on it tells a regular file or directory
//     before anything is opened for reading (opening a device can have side effects, a FIFO
//     can block);
//   - only then is that same inode reopened (pathrs.Reopen, through /proc/thread-self/fd)
//     with O_RDONLY|O_NONBLOCK|O_CLOEXEC, checked again (same device and inode), and read
//     through that descriptor up to a size cap. The path is never resolved twice.
//
// Callers run these reads under procread (a time bound): a file on a stuck FUSE server can
// still block a read.
package procroot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"
)

// MaxDirEntries caps how many names ReadDirNames returns (and reads: getdents stops there).
// A tenant's /tmp can hold any number of files; the exporter looks in it only for
// hsperfdata_<user> directories, which a JVM creates early, so a /tmp whose first 4096
// entries hold none reports the perf data as not found. 4096 names cost at most ~1 MiB
// (255-byte names), usually ~100 KiB, for the duration of one listing.
const MaxDirEntries = 4096

// ErrNotRegular is returned for a name that resolves to something other than a regular file
// (a FIFO, a socket, a device, a directory where a file was expected).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned by ReadFile for a file larger than the caller's cap: a partial
// read of a config file would be parsed as if whole.
var ErrTooLarge = errors.New("file larger than its read cap")

// Root is an open process root. Close it when done; it holds one descriptor.
type Root struct {
	dir *os.File
	pid int
}

// Open opens <procfs>/<pid>/root. The magic link is followed here, once, by the kernel: that
// is the entry into the process's root; nothing below it may leave it.
func Open(procfs string, pid int) (*Root, error) {
	if procfs == "" {
		procfs = "/proc"
	}
	d, err := os.OpenFile(filepath.Join(procfs, strconv.Itoa(pid), "root"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &Root{dir: d, pid: pid}, nil
}

// Close closes the root's descriptor.
func (r *Root) Close() error { return r.dir.Close() }

// File is a resolved, not yet opened name below a root: an O_PATH handle and its fstat.
type File struct {
	name string
	h    *os.File
	st   unix.Stat_t
}

// Lookup resolves name (absolute or relative to the root; symlinks followed inside the root)
// to an O_PATH handle and fstats it. It opens nothing for reading.
func (r *Root) Lookup(name string) (*File, error) {
	h, err := pathrs.OpenatInRoot(r.dir, name)
	if err != nil {
		return nil, r.wrap(name, err)
	}
	f := &File{name: name, h: h}
	if err := unix.Fstat(int(h.Fd()), &f.st); err != nil {
		h.Close()
		return nil, r.wrap(name, err)
	}
	return f, nil
}

// Close releases the handle.
func (f *File) Close() error { return f.h.Close() }

// Uid is the owner of the file.
func (f *File) UID() int { return int(f.st.Uid) }

// Size is the file's size when it was looked up.
func (f *File) Size() int64 { return f.st.Size }

// IsRegular reports whether the name resolved to a regular file.
func (f *File) IsRegular() bool { return f.st.Mode&unix.S_IFMT == unix.S_IFREG }

// IsDir reports whether the name resolved to a directory.
func (f *File) IsDir() bool { return f.st.Mode&unix.S_IFMT == unix.S_IFDIR }

// open reopens the looked-up inode for reading, without blocking on open, and checks that
// it is still the same inode.
func (f *File) open(extra int) (*os.File, error) {
	o, err := pathrs.Reopen(f.h, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY|extra)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(o.Fd()), &st); err != nil {
		o.Close()
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	if st.Dev != f.st.Dev || st.Ino != f.st.Ino || st.Mode&unix.S_IFMT != f.st.Mode&unix.S_IFMT {
		o.Close()
		return nil, fmt.Errorf("%s: changed while being opened", f.name)
	}
	return o, nil
}

// Read reads at most max bytes of a regular file through the handle's inode (never the
// path). A file larger than limit is read up to limit; ErrNotRegular for anything else.
func (f *File) Read(limit int64) ([]byte, error) {
	if !f.IsRegular() {
		return nil, fmt.Errorf("%s: %w", f.name, ErrNotRegular)
	}
	o, err := f.open(0)
	if err != nil {
		return nil, err
	}
	defer o.Close()
	// Size the buffer by what fstat says, capped: the file may grow or shrink meanwhile.
	buf := make([]byte, 0, min(limit, max(f.st.Size, 0)+1, 1<<20))
	w := &capped{b: buf}
	_, err = io.Copy(w, io.LimitReader(o, limit))
	return w.b, err
}

// capped is an io.Writer appending to a slice (bytes.Buffer would double its capacity past
// what the cap needs).
type capped struct{ b []byte }

func (c *capped) Write(p []byte) (int, error) { c.b = append(c.b, p...); return len(p), nil }

// ReadFile looks name up and reads it whole if it is a regular file of at most limit bytes:
// ErrNotRegular, ErrTooLarge otherwise. Errors wrap fs.ErrNotExist and fs.ErrPermission.
func (r *Root) ReadFile(name string, limit int64) ([]byte, error) {
	f, err := r.Lookup(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.IsRegular() && f.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes: %w (%d)", name, f.Size(), ErrTooLarge, limit)
	}
	b, err := f.Read(limit + 1)
	if err == nil && int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: grew past %d bytes: %w", name, limit, ErrTooLarge)
	}
	return b, err
}

// ReadDirNames lists at most limit (MaxDirEntries when limit <= 0 or above it) names of the
// directory name, in directory order. truncated reports that more entries may exist.
func (r *Root) ReadDirNames(name string, limit int) (names []string, truncated bool, err error) {
	if limit <= 0 || limit > MaxDirEntries {
		limit = MaxDirEntries
	}
	f, err := r.Lookup(name)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if !f.IsDir() {
		return nil, false, fmt.Errorf("%s: %w", name, unix.ENOTDIR)
	}
	d, err := f.open(unix.O_DIRECTORY)
	if err != nil {
		return nil, false, err
	}
	defer d.Close()
	names, err = d.Readdirnames(limit)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return names, len(names) == limit, err
}

// wrap names the failed lookup relative to the process root and keeps errno for errors.Is
// (fs.ErrNotExist, fs.ErrPermission, ELOOP for a magic link or a symlink loop).
func (r *Root) wrap(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &fs.PathError{Op: "open", Path: fmt.Sprintf("/proc/%d/root:%s", r.pid, name), Err: err}
}
