// Package malloc reads the glibc malloc state of another process from outside: how many
// arenas and heaps it has, their resident memory, its arena limit and which allocator it
// uses. It never attaches, stops or signals the process: it reads /proc/<pid>/maps, a few
// words of /proc/<pid>/mem, and on request /proc/<pid>/smaps.
//
// Errors wrap os.ErrPermission (no ptrace-read access), os.ErrNotExist (the process is
// gone) or procread.ErrTimeout.
package malloc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/quota-exporter/quota_exporter/exporter/internal/execache"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procenv"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
)

// Methods of counting heaps.
const (
	MethodHeaders = "headers" // heap_info headers read from /proc/<pid>/mem: exact
	MethodMaps    = "maps"    // mapping shapes only: undercounts full heaps, arenas = heaps
)

// Allocators.
const (
	Glibc    = "glibc"
	Jemalloc = "jemalloc"
	Tcmalloc = "tcmalloc"
	Mimalloc = "mimalloc"
	Other    = "other" // no glibc libc mapped: static Go binaries, musl, static glibc
)

const (
	maxCandidates = 1 << 14 // aligned addresses probed per process (1 TiB of anonymous rw memory); also caps heuristic heaps
)

// Range is an address range [Start, End).
type Range struct{ Start, End uint64 }

// State is what Inspect found.
type State struct {
	Allocator string
	// Glibc is the libc version from the mapped file name ("2.31" for libc-2.31.so), "2.34+"
	// for the unversioned libc.so.6 of glibc >= 2.34, "" when no glibc is mapped.
	Glibc string
	// Method is MethodHeaders or MethodMaps; "" when the allocator is not glibc-based
	// (Allocator Other) and nothing was counted.
	Method string
	// Arenas counts non-main arenas (the main arena lives in the brk heap and always exists).
	// With MethodMaps it equals Heaps, an approximation.
	Arenas, Heaps int
	// HeapRanges are the heaps' 64 MiB reservations, for HeapResidentBytes.
	HeapRanges []Range
}

// Inspect reads the malloc state of pid under procfs (normally "/proc"). Without a deadline
// in ctx the whole call is bounded by procread.DefaultTimeout.
func Inspect(ctx context.Context, procfs string, pid int) (*State, error) {
	return inspect(ctx, procfs, pid, newEnviron(ctx, procfs, pid), nil, nil)
}

// EnvKeys are the environment variables Inspect and arenaLimit read.
func EnvKeys() []string {
	return []string{"LD_PRELOAD", "MALLOC_CONF", "MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "GLIBC_TUNABLES"}
}

// Known is what a caller watching many processes has read already and shares between
// readers: the environment variables (at least EnvKeys) and the thread names; and the
// allocators told from executables' symbols, by executable (nil: told again each time).
type Known struct {
	Env         map[string]string
	EnvErr      error
	ThreadNames func() ([]string, error)
	Allocators  *execache.Cache[string]
}

// ErrLoading is returned for a process whose dynamic loader has not yet mapped its libraries
// (it exec'ed a moment ago): nothing can be told yet, and nothing should be remembered.
var ErrLoading = errors.New("process is still loading its libraries")

// InspectWithLimit is Inspect followed by arenaLimit (for glibc processes; 0 otherwise),
// with environ and task/*/comm not read here but taken from k.
func InspectWithLimit(ctx context.Context, procfs, sysfs string, pid int, k Known) (*State, int, error) {
	env := &environ{read: true, vars: k.Env, err: k.EnvErr}
	st, err := inspect(ctx, procfs, pid, env, k.ThreadNames, k.Allocators)
	if err != nil || st.Allocator != Glibc {
		return st, 0, err
	}
	limit, _, err := arenaLimit(ctx, sysfs, pid, env)
	return st, limit, err
}

// environ reads the variables Inspect and arenaLimit need from /proc/<pid>/environ once, on
// first use.
type environ struct {
	ctx    context.Context
	procfs string
	pid    int
	read   bool
	vars   map[string]string
	err    error
}

func newEnviron(ctx context.Context, procfs string, pid int) *environ {
	return &environ{ctx: ctx, procfs: procfs, pid: pid}
}

func (e *environ) get() (map[string]string, error) {
	if !e.read {
		e.vars, e.err = procenv.Lookup(e.ctx, e.procfs, e.pid, EnvKeys()...)
		e.read = true
	}
	return e.vars, e.err
}

func inspect(ctx context.Context, procfs string, pid int, environ *environ, threadNames func() ([]string, error), allocators *execache.Cache[string]) (*State, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, procread.DefaultTimeout)
		defer cancel()
	}
	dir := filepath.Join(procfs, strconv.Itoa(pid))
	maps, err := procread.Do(ctx, func() (*mapsSummary, error) {
		f, err := os.Open(filepath.Join(dir, "maps"))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return scanMaps(f, maxCandidates)
	})
	if err != nil {
		return nil, fmt.Errorf("malloc: pid %d maps: %w", pid, err)
	}
	if maps.mappings == 0 {
		// Zombies (and kernel threads) have no address space.
		return nil, fmt.Errorf("malloc: pid %d has no mappings (exited): %w", pid, os.ErrNotExist)
	}
	if maps.loader && maps.glibc == "" && maps.allocLib == "" {
		// Exec'ed a moment ago: the kernel mapped glibc's loader, which has not yet mapped
		// libc. Deciding now would call a glibc process "other" until the next look.
		return nil, fmt.Errorf("malloc: pid %d: %w", pid, ErrLoading)
	}
	st := &State{Glibc: maps.glibc}
	// Environment errors are not fatal: maps is the main evidence.
	env, _ := environ.get()
	st.Allocator = detectAllocator(ctx, dir, maps.allocLib, env, st.Glibc != "", threadNames, allocators)
	if st.Glibc == "" {
		return st, nil
	}
	if err := readHeaders(ctx, dir, maps, st); err != nil {
		return nil, fmt.Errorf("malloc: pid %d: %w", pid, err)
	}
	return st, nil
}

// readHeaders counts heaps from their headers, or falls back to the maps heuristic when
// /proc/<pid>/mem cannot be read.
func readHeaders(ctx context.Context, dir string, maps *mapsSummary, st *State) error {
	cands := maps.cands
	f, err := procread.Do(ctx, func() (*os.File, error) { return os.Open(filepath.Join(dir, "mem")) })
	if err != nil {
		if unreadable(err) {
			fallback(maps, st)
			return nil
		}
		return vanished(err)
	}
	defer f.Close()
	var hdrs []Header
	eio := 0
	buf := make([]byte, headerSize)
	for _, a := range cands {
		if a > 1<<63-1 { // beyond what a file offset can address
			continue
		}
		n, err := procread.ReadAt(ctx, f, buf, int64(a))
		switch {
		case err == nil || n == len(buf):
		case errors.Is(err, io.EOF) && n == 0:
			// The mm is gone: the process exited after maps was read.
			return fmt.Errorf("reading %s: %w", f.Name(), os.ErrNotExist)
		case errors.Is(err, syscall.EIO):
			eio++ // unmapped since maps was read, or not readable at all
			continue
		case unreadable(err):
			fallback(maps, st)
			return nil
		default:
			return vanished(err)
		}
		if h, ok := ParseHeader(a, buf); ok {
			hdrs = append(hdrs, h)
		}
	}
	if len(cands) > 0 && eio == len(cands) {
		fallback(maps, st)
		return nil
	}
	heaps, arenas := Validate(hdrs)
	st.Method, st.Arenas, st.Heaps = MethodHeaders, arenas, len(heaps)
	st.HeapRanges = make([]Range, len(heaps))
	for i, h := range heaps {
		st.HeapRanges[i] = Range{h.Addr, h.Addr + HeapMaxSize}
	}
	return nil
}

// vanished makes ESRCH (opening mem of a zombie) wrap os.ErrNotExist like ENOENT does.
func vanished(err error) error { return kernel.Vanished(err) }

func unreadable(err error) bool {
	return errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)
}

func fallback(maps *mapsSummary, st *State) {
	st.HeapRanges = maps.heuristic
	st.Method, st.Heaps, st.Arenas = MethodMaps, len(st.HeapRanges), len(st.HeapRanges)
}

var libcVersioned = regexp.MustCompile(`^libc-2\.(\d+)\.so$`)

// glibcVersion finds glibc's libc among the mappings. Since 2.34 the file is libc.so.6
// itself; before, libc.so.6 was a symlink to libc-2.NN.so and maps shows the target.
func glibcVersion(maps []Mapping) string {
	for _, m := range maps {
		if m.Inode != 0 {
			if v := libcVersion(m.Path); v != "" {
				return v
			}
		}
	}
	return ""
}

// libcVersion is the glibc version of a mapped file name, "" when it is no glibc libc.
func libcVersion(name string) string {
	base := path.Base(strings.TrimSuffix(name, " (deleted)"))
	if base == "libc.so.6" {
		return "2.34+"
	}
	if v := libcVersioned.FindStringSubmatch(base); v != nil {
		return "2." + v[1]
	}
	return ""
}
