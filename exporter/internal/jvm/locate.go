package jvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/quota-exporter/quota_exporter/exporter/internal/hsperfdata"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procstatus"
)

// Reason says why a JVM has no usable perf data. None of these is a failure of the reader.
type Reason string

// Reasons for absent perf data.
const (
	ReasonDisabled   Reason = "disabled"        // -XX:-UsePerfData or -XX:+PerfDisableSharedMem
	ReasonNoUser     Reason = "no_passwd_entry" // the JVM's uid has no passwd entry (random uids)
	ReasonNotFound   Reason = "not_found"       // not created yet, or /tmp not reachable
	ReasonNotReady   Reason = "not_ready"       // file exists, VM still initialising
	ReasonUnreadable Reason = "unreadable"      // permission denied
	ReasonStale      Reason = "stale"           // left by an earlier process with this pid
	ReasonInvalid    Reason = "invalid"         // not a perf data file
	ReasonEmpty      Reason = "empty"           // the JVM gave up on its file (see errEmptyFile)
)

// errEmptyFile explains ReasonEmpty. HotSpot creates its file empty, locks it (flock) and only
// then sizes it; a JVM that cannot take the lock logs "Cannot use file ... locked by another
// process" and keeps its perf data in private memory for the rest of its life. Another JVM
// starting at the same moment in a shared /tmp takes that lock for a moment while it cleans up
// files of dead JVMs (JDK-8286030): JVMs started together in one container, or in containers
// sharing an emptyDir at /tmp, can lose their perf data this way.
var errEmptyFile = errors.New("the file is empty: the JVM is creating it, or gave up on it and keeps its perf data in private memory until it restarts " +
	"(another JVM starting at the same moment in a shared /tmp held the file's lock, JDK-8286030)")

// UnavailableError reports absent perf data with its reason; Err is the underlying error, if any
// (errors.Is(err, os.ErrPermission) works through it).
type UnavailableError struct {
	Reason Reason
	Err    error
}

func (e *UnavailableError) Error() string {
	if e.Err != nil {
		return "perf data unavailable (" + string(e.Reason) + "): " + e.Err.Error()
	}
	return "perf data unavailable (" + string(e.Reason) + ")"
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// maxPasswd caps /etc/passwd reads.
const maxPasswd = 1 << 20

// procStatus holds the few /proc/<pid>/status fields used here.
type procStatus = procstatus.Status

func readStatus(ctx context.Context, procfs string, pid int) (procStatus, error) {
	b, err := procread.ReadFile(ctx, filepath.Join(procfs, strconv.Itoa(pid), "status"), procstatus.MaxSize)
	if err != nil {
		return procStatus{}, vanished(err)
	}
	return parseStatus(b, pid), nil
}

func parseStatus(b []byte, pid int) procStatus { return procstatus.Parse(b, pid) }

// CountCPUList counts the CPUs in a list like "0-3,8,10-11"; 0 when malformed
// (kernel.CountCPUList).
func CountCPUList(s string) int {
	n, _ := kernel.CountCPUList(s)
	return n
}

// vanished maps a process that went away to os.ErrNotExist (ESRCH shows up on some reads).
func vanished(err error) error { return kernel.Vanished(err) }

// FindPerfData locates the perf data file of host pid through its root:
// <procfs>/<pid>/root/tmp/hsperfdata_*/<nspid>. With several candidates (several users' dirs
// in a shared /tmp) the one owned by the process's uid wins. Absence is an *UnavailableError
// with ReasonNotFound or ReasonUnreadable; Inspect refines the reason.
func FindPerfData(ctx context.Context, procfs string, pid int) (string, error) {
	st, err := readStatus(ctx, procfs, pid)
	if err != nil {
		return "", err
	}
	return findPerfData(ctx, procfs, pid, st)
}

func findPerfData(ctx context.Context, procfs string, pid int, st procStatus) (string, error) {
	tmp := filepath.Join(procfs, strconv.Itoa(pid), "root", "tmp")
	return procread.Do(ctx, func() (string, error) {
		ents, err := os.ReadDir(tmp)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return "", &UnavailableError{Reason: ReasonUnreadable, Err: err}
			}
			if errors.Is(err, fs.ErrNotExist) {
				if _, serr := os.Stat(filepath.Join(procfs, strconv.Itoa(pid))); serr != nil {
					return "", vanished(serr) // the process, not the file, is gone
				}
			}
			return "", &UnavailableError{Reason: ReasonNotFound, Err: err}
		}
		var found string
		var permErr error
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), "hsperfdata_") {
				continue
			}
			p := filepath.Join(tmp, e.Name(), strconv.Itoa(st.NSPid))
			fi, err := os.Lstat(p) // a user-controlled symlink is not followed (as root)
			if err != nil {
				if errors.Is(err, fs.ErrPermission) {
					permErr = err
				}
				continue
			}
			if !fi.Mode().IsRegular() {
				continue
			}
			if sys, ok := fi.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == st.UID {
				return p, nil
			}
			if found == "" {
				found = p
			}
		}
		if found != "" {
			return found, nil
		}
		if permErr != nil {
			return "", &UnavailableError{Reason: ReasonUnreadable, Err: permErr}
		}
		return "", &UnavailableError{Reason: ReasonNotFound}
	})
}

// hasPasswdEntry reports whether uid is in the process's /etc/passwd. ok is false when that
// cannot be told (no readable file: NSS may resolve it some other way).
func hasPasswdEntry(ctx context.Context, procfs string, pid, uid int) (has, ok bool) {
	b, err := procread.ReadFile(ctx, filepath.Join(procfs, strconv.Itoa(pid), "root", "etc", "passwd"), maxPasswd)
	if err != nil || uid < 0 {
		return false, false
	}
	want := strconv.Itoa(uid)
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		f := bytes.SplitN(line, []byte{':'}, 4)
		if len(f) >= 3 && string(f[2]) == want {
			return true, true
		}
	}
	return false, true
}

// readPerfData reads the perf data file at path, which lies in a directory the JVM's user
// controls: it is opened without following a symlink and without blocking on a FIFO, and
// read only if it is a regular file owned by the process's uid (uid < 0: unknown, not
// checked). Anything else is an *UnavailableError with ReasonUnreadable.
func readPerfData(ctx context.Context, path string, uid int) ([]byte, error) {
	return procread.Do(ctx, func() ([]byte, error) {
		f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if errors.Is(err, syscall.ELOOP) {
			return nil, &UnavailableError{Reason: ReasonUnreadable, Err: fmt.Errorf("%s is a symbolic link: not followed", path)}
		}
		if err != nil {
			return nil, err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, &UnavailableError{Reason: ReasonUnreadable, Err: fmt.Errorf("%s is not a regular file", path)}
		}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok && uid >= 0 && int(sys.Uid) != uid {
			return nil, &UnavailableError{Reason: ReasonUnreadable, Err: fmt.Errorf("%s is owned by uid %d, not by the process's uid %d", path, sys.Uid, uid)}
		}
		return io.ReadAll(io.LimitReader(f, hsperfdata.MaxFileSize))
	})
}
