package malloc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// TestHelperInspect is run by the permission tests in a subprocess with dropped privileges.
func TestHelperInspect(t *testing.T) {
	pid, err := strconv.Atoi(os.Getenv("MALLOC_TEST_HELPER_PID"))
	if err != nil {
		t.Skip("helper process only")
	}
	st, err := Inspect(context.Background(), "/proc", pid)
	switch {
	case errors.Is(err, os.ErrPermission):
		fmt.Println("RESULT permission")
	case err != nil:
		fmt.Println("RESULT error", err)
	default:
		fmt.Println("RESULT", st.Method, st.Arenas, st.Heaps)
	}
}

// runAs runs TestHelperInspect on pid as uid/gid 65534 and returns its RESULT line.
func runAs(t *testing.T, pid int) string {
	t.Helper()
	// The go test binary lives in a 0700 directory: copy it where nobody can run it.
	dir, err := os.MkdirTemp("", "malloc-helper")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "helper.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	cmd := exec.Command(exe, "-test.run=^TestHelperInspect$", "-test.v")
	cmd.Env = []string{"MALLOC_TEST_HELPER_PID=" + strconv.Itoa(pid), "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "RESULT") {
			return l
		}
	}
	t.Fatalf("helper: %v\n%s", err, out)
	return ""
}

// An unprivileged reader of another user's process gets an error wrapping os.ErrPermission
// (maps itself needs ptrace-read access).
func TestPermissionDenied(t *testing.T) {
	testutil.RequireRoot(t)
	bin := buildProg(t)
	p := startProg(t, []string{bin, "4", "0"}, nil, nil) // runs as root
	if got := runAs(t, p.cmd.Process.Pid); got != "RESULT permission" {
		t.Errorf("unprivileged reader of a root process: %q, want permission", got)
	}
}

// The "maps" fallback needs a reader that may read maps (ptrace mode READ) but not mem
// (mode ATTACH). Without an LSM that separates the two, the kernel applies the same checks
// (uid match or CAP_SYS_PTRACE, dumpable) to both, so no real reader can reach that state.
// Yama with ptrace_scope >= 1 does: a same-uid reader that is not the target's ancestor.
func TestFallbackToMaps(t *testing.T) {
	testutil.RequireRoot(t)
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil || strings.TrimSpace(string(b)) == "0" {
		t.Skip("needs Yama ptrace_scope >= 1 (no LSM here separates ptrace READ from ATTACH)")
	}
	if strings.TrimSpace(string(b)) == "3" {
		t.Skip("Yama ptrace_scope 3 denies every attach, including the test's own setup")
	}
	bin := buildProg(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(filepath.Dir(bin)); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755)
	}
	p := startProg(t, []string{bin, "8", "0"}, nil, &syscall.Credential{Uid: 65534, Gid: 65534})
	got := runAs(t, p.cmd.Process.Pid)
	t.Logf("%s (malloc_info %+v)", got, p.truth)
	want := fmt.Sprintf("RESULT maps %d %d", p.truth.heaps, p.truth.heaps)
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
