package jvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/quota-exporter/quota_exporter/exporter/internal/hsperfdata"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procroot"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procstatus"
)

// Reason says why a JVM has no usable perf data. None of these is a failure of the reader.
type Reason string

// Reasons for absent perf data.
const (
	ReasonDisabled    Reason = "disabled"        // -XX:-UsePerfData or -XX:+PerfDisableSharedMem
	ReasonNoUser      Reason = "no_passwd_entry" // the JVM's uid has no passwd entry (random uids)
	ReasonNotFound    Reason = "not_found"       // not created yet, or /tmp not reachable
	ReasonNotReady    Reason = "not_ready"       // file exists, VM still initialising
	ReasonUnreadable  Reason = "unreadable"      // permission denied
	ReasonStale       Reason = "stale"           // its VM began before the process: an earlier process's (same pid) or a copy
	ReasonForeign     Reason = "foreign"         // its VM began long after the process started: another process's
	ReasonNoStartTime Reason = "no_start_time"   // no VM start time in the file: whose it is cannot be told
	ReasonInvalid     Reason = "invalid"         // not a perf data file
	ReasonEmpty       Reason = "empty"           // the JVM gave up on its file (see errEmptyFile)
)

// errEmptyFile explains ReasonEmpty. HotSpot creates its file empty, locks it (flock) and only
// then sizes it; a JVM that cannot take the lock logs "Cannot use file ... locked by another
// process" and keeps its perf data in private memory for the rest of its life. Another JVM
// starting at the same moment in a shared /tmp takes that lock for a moment while it cleans up
// files of dead JVMs (JDK-8286030): JVMs started together in one container, or in containers
// sharing an emptyDir at /tmp, can lose their perf data this way.
var errEmptyFile = errors.New("the file is empty: the JVM is creating it, or gave up on it and keeps its perf data in private memory until it restarts " +
	"(another JVM starting at the same moment in a shared /tmp held the file's lock, JDK-8286030)")

// errNoStartTime explains ReasonNoStartTime.
var errNoStartTime = errors.New("the file has no VM start time (sun.rt.createVmBeginTime), so whose it is cannot be told; every HotSpot JVM writes one")

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

// Mismatch reports a file refused because it is not the process's own: its VM start time
// does not match the process's start (stale, foreign), or it has none (no_start_time).
func (e *UnavailableError) Mismatch() bool {
	return e.Reason == ReasonStale || e.Reason == ReasonForeign || e.Reason == ReasonNoStartTime
}

// maxPasswd caps /etc/passwd reads (10 000 users take about 700 KiB); a larger file is not
// read, and the passwd check then tells nothing.
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

// vanished maps a process that went away to os.ErrNotExist (ESRCH shows up on some reads).
func vanished(err error) error { return kernel.Vanished(err) }

// perfDataDir is where HotSpot keeps its perf data (os::get_temp_directory on Linux), inside
// the process's root.
const perfDataDir = "/tmp"

// readPerfData finds and reads the perf data file of pid inside its root (package procroot:
// every symlink resolved inside that root, regular files only, read through the descriptor
// that was checked). known, when set, is the name found by an earlier call and is tried first,
// so that a scrape does not list the tenant's /tmp again; otherwise /tmp is listed (at most
// procroot.MaxDirEntries names) for hsperfdata_* directories holding <nspid>. The file must
// be owned by the process's uid (uid < 0: unknown, not checked): the directory is the JVM
// user's, and the exporter runs as root. Anything that is not the process's own regular file
// is an *UnavailableError (ReasonNotFound or ReasonUnreadable); other errors mean the process
// is gone or the read timed out.
func readPerfData(ctx context.Context, procfs string, pid int, st procStatus, known string) (name string, data []byte, err error) {
	type found struct {
		name string
		data []byte
	}
	r, err := procread.Do(ctx, func() (found, error) {
		root, err := procroot.Open(procfs, pid)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return found{}, &UnavailableError{Reason: ReasonUnreadable, Err: err}
			}
			return found{}, vanished(err)
		}
		defer root.Close()
		if known != "" {
			if b, err := readOwnPerfData(root, known, st.UID); err == nil {
				return found{known, b}, nil
			}
		}
		names, _, err := root.ReadDirNames(perfDataDir, procroot.MaxDirEntries)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return found{}, &UnavailableError{Reason: ReasonUnreadable, Err: err}
			}
			if errors.Is(err, fs.ErrNotExist) {
				if _, serr := os.Stat(filepath.Join(procfs, strconv.Itoa(pid))); serr != nil {
					return found{}, vanished(serr) // the process, not the directory, is gone
				}
			}
			return found{}, &UnavailableError{Reason: ReasonNotFound, Err: err}
		}
		var refused error
		for _, n := range names {
			if !strings.HasPrefix(n, "hsperfdata_") {
				continue
			}
			p := perfDataDir + "/" + n + "/" + strconv.Itoa(st.NSPid)
			b, err := readOwnPerfData(root, p, st.UID)
			if err == nil {
				return found{p, b}, nil
			}
			if !errors.Is(err, fs.ErrNotExist) && refused == nil {
				refused = err
			}
		}
		if refused != nil {
			return found{}, refused
		}
		return found{}, &UnavailableError{Reason: ReasonNotFound}
	})
	return r.name, r.data, err
}

// readOwnPerfData reads name below root if it is a regular file owned by uid (uid < 0: not
// checked). Absence wraps fs.ErrNotExist; anything else that is not the process's own regular
// file is an *UnavailableError with ReasonUnreadable.
func readOwnPerfData(root *procroot.Root, name string, uid int) ([]byte, error) {
	f, err := root.Lookup(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, &UnavailableError{Reason: ReasonUnreadable, Err: err}
	}
	defer f.Close()
	if !f.IsRegular() {
		return nil, &UnavailableError{Reason: ReasonUnreadable, Err: fmt.Errorf("%s is not a regular file", name)}
	}
	if uid >= 0 && f.UID() != uid {
		return nil, &UnavailableError{Reason: ReasonUnreadable, Err: fmt.Errorf("%s is owned by uid %d, not by the process's uid %d", name, f.UID(), uid)}
	}
	b, err := f.Read(hsperfdata.MaxFileSize)
	if err != nil {
		return nil, &UnavailableError{Reason: ReasonUnreadable, Err: err}
	}
	return b, nil
}

// hasPasswdEntry reports whether uid is in the process's /etc/passwd. ok is false when that
// cannot be told (no readable file: NSS may resolve it some other way).
func hasPasswdEntry(ctx context.Context, procfs string, pid, uid int) (has, ok bool) {
	b, err := readInRoot(ctx, procfs, pid, "/etc/passwd", maxPasswd)
	if err != nil || uid < 0 {
		return false, false
	}
	return passwdHasUID(b, uid), true
}

// passwdHasUID reports whether a passwd file's text has an entry for uid.
func passwdHasUID(b []byte, uid int) bool {
	want := strconv.Itoa(uid)
	for line := range kernel.Lines(b) {
		_, rest, ok := bytes.Cut(line, []byte{':'})  // name
		_, rest, ok2 := bytes.Cut(rest, []byte{':'}) // password
		id, _, _ := bytes.Cut(rest, []byte{':'})
		if ok && ok2 && string(id) == want {
			return true
		}
	}
	return false
}

// readInRoot reads name, resolved inside pid's root, if it is a regular file of at most limit
// bytes (procroot.Root.ReadFile), within ctx's deadline.
func readInRoot(ctx context.Context, procfs string, pid int, name string, limit int64) ([]byte, error) {
	return procread.Do(ctx, func() ([]byte, error) {
		root, err := procroot.Open(procfs, pid)
		if err != nil {
			return nil, vanished(err)
		}
		defer root.Close()
		return root.ReadFile(name, limit)
	})
}
