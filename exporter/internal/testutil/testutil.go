// Package testutil holds helpers shared by tests that need real system resources:
// root, v1 cgroups, a JDK, a C compiler. A missing prerequisite skips the test on a
// developer machine and fails it when CI=true, because on CI these tests must really run.
package testutil

import (
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// OnCI reports whether the tests run under CI (CI=true), where prerequisites are mandatory.
func OnCI() bool { return os.Getenv("CI") == "true" }

// SkipShort skips a test that needs the real system (root, cgroups, a program to build or
// run) under go test -short: make check's edit loop runs the rest in seconds.
func SkipShort(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipping under -short: needs %s", needs)
	}
}

// Require skips the test with reason when ok is false, or fails it on CI.
func Require(t testing.TB, ok bool, reason string) {
	t.Helper()
	if ok {
		return
	}
	if OnCI() {
		t.Fatalf("prerequisite missing on CI (CI=true): %s", reason)
	}
	t.Skipf("skipping: %s (set up the prerequisite, or run as root; this test must run on CI)", reason)
}

// RequireRoot needs uid 0.
func RequireRoot(t testing.TB) {
	t.Helper()
	SkipShort(t, "root")
	Require(t, os.Geteuid() == 0, "needs root")
}

// LookPath returns the path of an executable or skips/fails the test.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	SkipShort(t, name)
	p, err := exec.LookPath(name)
	Require(t, err == nil, name+" not found in PATH")
	return p
}

// ReadGzip returns the uncompressed content of a gzipped fixture file.
func ReadGzip(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// StartPiped starts cmd with its stdout piped to the caller; the process is killed and
// reaped when the test ends.
func StartPiped(t testing.TB, cmd *exec.Cmd) io.Reader {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return out
}

// Allocated is what fn allocates on the Go heap, in bytes (after a GC, so that what came
// before is not counted).
func Allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// Retained is how much more of the Go heap is live after fn, with fn's result kept alive,
// than before it, in bytes (0 if less): what a caller that keeps the result keeps.
func Retained(fn func() any) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	v := fn()
	runtime.GC()
	runtime.ReadMemStats(&b)
	runtime.KeepAlive(v)
	return b.HeapAlloc - min(a.HeapAlloc, b.HeapAlloc)
}

// RetainedLeast is the least of tries Retained measures of fn, which must give the same
// result each time (a pure parser): the runtime's and the test framework's own heap only
// add to a measure, and on a busy machine one measure has come out 1 KiB over a 16 KiB bound.
func RetainedLeast(tries int, fn func() any) uint64 {
	least := Retained(fn)
	for range tries - 1 {
		least = min(least, Retained(fn))
	}
	return least
}

// AllocBound fails t when fn allocates more than limit bytes on the Go heap. Fuzz targets of
// parsers call it on every input: what a parser allocates must be bounded by a constant, not
// by what the input claims. It runs no GC (it counts allocations, not live bytes), so it is
// cheap enough for every input. The count is process-wide and a fuzz worker's own goroutines
// allocate now and then: over the bound, fn is run twice more and the least count is its
// own (fn must be repeatable, and start no goroutines that allocate on their own).
func AllocBound(t testing.TB, limit uint64, fn func()) {
	t.Helper()
	n := allocatedBy(fn)
	for i := 0; i < 2 && n > limit; i++ {
		n = min(n, allocatedBy(fn))
	}
	if n > limit {
		t.Fatalf("allocated %d bytes, bound %d", n, limit)
	}
}

func allocatedBy(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}
