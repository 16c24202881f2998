package gopause

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/elfscan"
	"github.com/quota-exporter/quota_exporter/exporter/internal/execache"
)

// Why a process is not probed (RefusedError.Reason); each is a value of the exporter's
// refusal counter.
const (
	ReasonSetuid         = "setuid"             // setuid or setgid executable
	ReasonCapabilities   = "file_capabilities"  // executable with file capabilities
	ReasonNotRegular     = "not_regular"        // not a regular file
	ReasonTooManyProbes  = "too_many_probes"    // more restart points than MaxRestarted
	ReasonTableTooLarge  = "table_too_large"    // function table above maxTable
	ReasonNodeProbeLimit = "node_probe_limit"   // Options.MaxProbes reached
	ReasonExecuted       = "exec_during_attach" // the process ran another binary by the end of the attach
)

// RefusedError: the process's executable is not probed, on purpose.
type RefusedError struct {
	Reason string
	Detail string
}

func (e *RefusedError) Error() string { return "refused (" + e.Reason + "): " + e.Detail }

// Refusal returns the reason when err is a RefusedError.
func Refusal(err error) (string, bool) {
	var r *RefusedError
	if errors.As(err, &r) {
		return r.Reason, true
	}
	return "", false
}

// FileID identifies an executable's inode.
type FileID struct{ Dev, Ino uint64 }

func fileID(st *unix.Stat_t) FileID { return FileID{uint64(st.Dev), st.Ino} }

// Executable is one executable opened once: what open parsed is what Attach probes (through
// /proc/self/fd/N, which the kernel resolves to this very inode), so a process that runs
// another binary in between can never get probes at offsets computed from the first.
type Executable struct {
	f       *os.File
	ID      FileID
	Targets Targets
}

// found is what FindIn made of one executable file, kept by its identity (Tracer.found):
// the processes of one binary share one parse.
type found struct {
	targets Targets
	err     error
}

// maxFound caps the executables whose targets a tracer keeps (each a few hundred bytes).
const maxFound = 256

// open opens the executable at path (give /proc/<pid>/exe: it resolves inside containers),
// refuses setuid, setgid and file-capability binaries and anything but a regular file, and
// finds the targets through the same descriptor. The outcome for each executable file is kept
// in cache (nil: none): the probes go through the descriptor whose identity (device, inode,
// size, times) matched.
func open(path string, cache *execache.Cache[found]) (*Executable, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	ex := &Executable{f: f}
	if err := ex.check(); err != nil {
		f.Close()
		return nil, err
	}
	id, known := execache.IDOf(f)
	fd, ok := cache.Get(id)
	if !ok || !known {
		parseMu.Lock()
		fd.targets, fd.err = FindIn(f, id.Size)
		parseMu.Unlock()
		if known && (fd.err == nil || lasting(fd.err)) {
			cache.Add(id, fd)
		}
	}
	ex.Targets, err = fd.targets, fd.err
	if err != nil {
		f.Close()
		return nil, err
	}
	return ex, nil
}

// lasting tells the errors that the same file gives again: its content, not an I/O error.
func lasting(err error) bool {
	_, refused := Refusal(err)
	return refused || errors.Is(err, ErrNotGo) || errors.Is(err, ErrUnsupported) ||
		errors.Is(err, elfscan.ErrNotELF) || errors.Is(err, elfscan.ErrTooLarge)
}

// check refuses what must never be probed: a uprobe is a breakpoint in a file's code, and a
// privileged binary (setuid, setgid, file capabilities) is often shared with other tenants
// and the host from a base layer.
func (ex *Executable) check() error {
	var st unix.Stat_t
	if err := unix.Fstat(int(ex.f.Fd()), &st); err != nil {
		return err
	}
	ex.ID = fileID(&st)
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return &RefusedError{ReasonNotRegular, fmt.Sprintf("mode %#o", st.Mode)}
	case st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0:
		return &RefusedError{ReasonSetuid, fmt.Sprintf("mode %#o", st.Mode&0o7777)}
	}
	if n, err := unix.Fgetxattr(int(ex.f.Fd()), "security.capability", nil); err == nil && n > 0 {
		return &RefusedError{ReasonCapabilities, "security.capability is set"}
	}
	return nil
}

// Close releases the descriptor (the probes keep their own reference to the inode).
func (ex *Executable) Close() error { return ex.f.Close() }

// Same tells whether path (the process's /proc/<pid>/exe) is still this executable.
func (ex *Executable) Same(path string) bool {
	var st unix.Stat_t
	return unix.Stat(path, &st) == nil && fileID(&st) == ex.ID
}

// fdPath names the open file for the kernel: /proc/self/fd/N resolves to its inode.
func (ex *Executable) fdPath() string { return fmt.Sprintf("/proc/self/fd/%d", ex.f.Fd()) }
