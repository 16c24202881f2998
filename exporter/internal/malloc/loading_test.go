package malloc

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// A dynamically linked glibc process looked at between its exec and the loader's mapping of
// libc (the kernel has mapped the executable and ld-linux only) is not told apart yet: Inspect
// says so (ErrLoading) instead of calling it "other", and tells glibc once the loader ran.
// The test holds its own child at that moment by tracing it (PTRACE_TRACEME stops it at exec).
func TestInspectWhileLoaderRuns(t *testing.T) {
	testutil.RequireRoot(t)
	sleep := testutil.LookPath(t, "sleep")
	runtime.LockOSThread() // ptrace requests come from the thread that started the tracee
	defer runtime.UnlockOSThread()
	cmd := exec.Command(sleep, "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		t.Fatalf("child not stopped at exec: %v %v", ws, err)
	}
	st, err := Inspect(context.Background(), "/proc", pid)
	if !errors.Is(err, ErrLoading) {
		t.Fatalf("at exec: %+v, %v; want ErrLoading", st, err)
	}
	if err := syscall.PtraceDetach(pid); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err = Inspect(context.Background(), "/proc", pid)
		if err == nil && st.Allocator == Glibc {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the loader ran: %+v, %v; want glibc", st, err)
		}
	}
}
