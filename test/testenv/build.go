package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// RepoRoot is the repository's root directory (this package is two levels below it).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BuildGo builds the main package pkg of the module in dir (RepoRoot() and
// "./exporter/cmd/quota_exporter", or a workload's directory and ".") into out as `make build`
// and the image do: static (CGO_ENABLED=0), -trimpath, the local toolchain. flags are more
// `go build` flags. No go command skips the test (fails it on CI).
func BuildGo(t testing.TB, dir, pkg, out string, flags ...string) {
	t.Helper()
	args := append(append([]string{"build", "-trimpath"}, flags...), "-o", out, pkg)
	Tool(t, dir, []string{"CGO_ENABLED=0", "GOTOOLCHAIN=local"}, "go", args...)
}

// BuildExporter builds the exporter into out (BuildGo).
func BuildExporter(t testing.TB, out string, flags ...string) {
	t.Helper()
	BuildGo(t, RepoRoot(), "./exporter/cmd/quota_exporter", out, flags...)
}

// BuildC compiles the C file src into out with gcc and flags (e.g. -O2, -pthread, -static).
// No gcc skips the test (fails it on CI).
func BuildC(t testing.TB, src, out string, flags ...string) {
	t.Helper()
	Tool(t, "", nil, "gcc", append(flags, "-o", out, src)...)
}

// Tool runs a build tool (go, gcc, javac, jlink) in dir with env added and a 10-minute bound,
// failing the test with its output. A tool not in PATH skips the test (fails it on CI).
func Tool(t testing.TB, dir string, env []string, name string, args ...string) {
	t.Helper()
	_, err := exec.LookPath(name)
	Require(t, err == nil, name+" not found in PATH")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
