package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// GoProgram is one `go build` of a main package: -trimpath, CGO_ENABLED=0, the local toolchain.
type GoProgram struct {
	// Dir is the package's directory, relative to the test's directory or absolute: a
	// package of this module or a module of its own (example workloads, testdata).
	Dir string
	// Flags are more `go build` flags, e.g. "-ldflags=-s -w".
	Flags []string
	// Env is more environment, after the defaults (so it may override them), e.g. GOARCH=arm64.
	Env []string
	// Toolchain is a GOTOOLCHAIN other than the local one, e.g. go1.24.9. It comes from the
	// module proxy or cache, so a failure to build with it is a missing prerequisite.
	Toolchain string
}

// BuildGo builds the main package in dir and returns the executable's path (named after
// dir). flags are more `go build` flags. See GoProgram.Build.
func BuildGo(t testing.TB, dir string, flags ...string) string {
	t.Helper()
	return GoProgram{Dir: dir, Flags: flags}.Build(t)
}

// BuildGoSource builds one file of Go source, a main package without dependencies, into an
// executable called name.
func BuildGoSource(t testing.TB, name, source string) string {
	t.Helper()
	return BuildGoFiles(t, name, map[string][]byte{"main.go": []byte(source), "go.mod": []byte("module " + name + "\n\ngo 1.26\n")})
}

// BuildGoFiles builds a module made of files (name to content: go.mod, go.sum and the main
// package's sources) into an executable called name.
func BuildGoFiles(t testing.TB, name string, files map[string][]byte) string {
	t.Helper()
	h := sha256.New()
	for _, f := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s %d\n", f, len(files[f]))
		h.Write(files[f])
	}
	dir := filepath.Join(buildDir(t), "src-"+hex.EncodeToString(h.Sum(nil)[:8]), name)
	built.mu.Lock()
	var err error
	if !built.srcs[dir] { // written once: a build may be reading them
		err = os.MkdirAll(dir, 0o755)
		for f, b := range files {
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, f), b, 0o644)
			}
		}
		built.srcs[dir] = err == nil
	}
	built.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return BuildGo(t, dir)
}

// Build builds p once per test binary (tests and packages built in parallel on a busy
// machine take long to link) and returns the executable's path, in a directory anyone may
// read (tests run it as nobody) that the next test binary removes. Callers must not change
// the file: copy it first. No go command skips the test (fails it on CI).
func (p GoProgram) Build(t testing.TB) string {
	t.Helper()
	goBin := LookPath(t, "go")
	dir, err := filepath.Abs(p.Dir)
	if err != nil {
		t.Fatal(err)
	}
	tc := p.Toolchain
	if tc == "" {
		tc = "local"
	}
	env := append([]string{"CGO_ENABLED=0", "GOTOOLCHAIN=" + tc, "GOFLAGS=-buildvcs=false"}, p.Env...)
	args := append([]string{"build", "-trimpath"}, p.Flags...)
	missing := ""
	if p.Toolchain != "" {
		missing = "toolchain " + p.Toolchain + " does not build here"
	}
	return once(t, filepath.Base(dir), []string{dir, strings.Join(env, " "), strings.Join(args, " ")}, missing,
		func(out string) ([]byte, error) {
			cmd := exec.Command(goBin, append(args, "-o", out, ".")...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), env...)
			return cmd.CombinedOutput()
		})
}

// BuildC compiles the C file src with gcc and flags (e.g. -O2, -pthread) into an executable
// named after src, once per test binary. No gcc skips the test (fails it on CI).
func BuildC(t testing.TB, src string, flags ...string) string {
	t.Helper()
	gcc := LookPath(t, "gcc")
	abs, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimSuffix(filepath.Base(abs), ".c")
	return once(t, name, append([]string{abs}, flags...), "", func(out string) ([]byte, error) {
		return exec.Command(gcc, append(flags, "-o", out, abs)...).CombinedOutput()
	})
}

// built holds what this test binary has built, by key, in one directory.
var built struct {
	mu   sync.Mutex
	dir  string
	bins map[string]*build
	srcs map[string]bool // source directories written
}

type build struct {
	once sync.Once
	path string
	out  []byte
	err  error
}

// once runs make, into a new path whose base name is name, the first time key is asked for,
// and returns that path; every caller fails as the first did, as a missing prerequisite
// when missing says what is missing.
func once(t testing.TB, name string, key []string, missing string, make func(out string) ([]byte, error)) string {
	t.Helper()
	SkipShort(t, "building "+name)
	root := buildDir(t)
	k := strings.Join(key, "\x01")
	built.mu.Lock()
	b := built.bins[k]
	if b == nil {
		b = &build{path: filepath.Join(root, strconv.Itoa(len(built.bins)), name)}
		built.bins[k] = b
	}
	built.mu.Unlock()
	b.once.Do(func() {
		if b.err = os.MkdirAll(filepath.Dir(b.path), 0o755); b.err == nil {
			b.out, b.err = make(b.path)
		}
	})
	if b.err != nil && missing != "" {
		Require(t, false, fmt.Sprintf("%s: %v: %s", missing, b.err, b.out))
	}
	if b.err != nil {
		t.Fatalf("building %s: %v\n%s", strings.Join(key, " "), b.err, b.out)
	}
	return b.path
}

// buildPrefix names the build directories, one per test binary, with the binary's pid.
const buildPrefix = "quota-exporter-builds-"

// buildDir is this test binary's build directory. A test binary cannot clean up after its
// last test without a TestMain in every package, so each one removes the directories of
// test binaries that have ended.
func buildDir(t testing.TB) string {
	t.Helper()
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir != "" {
		return built.dir
	}
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), buildPrefix+"*"))
	for _, d := range old {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), buildPrefix))
		if err == nil && syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(d)
		}
	}
	dir := filepath.Join(os.TempDir(), buildPrefix+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	built.dir, built.bins, built.srcs = dir, map[string]*build{}, map[string]bool{}
	return dir
}

// CopyFile copies from to a new file to with mode (whatever the umask): a built executable
// under another name, or with another mode, for one test.
func CopyFile(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil {
		t.Fatal(err)
	}
}
