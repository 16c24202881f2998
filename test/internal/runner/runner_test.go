package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A started component logs to its file, and Stop ends its whole process group (the child
// the shell started too) with SIGTERM.
func TestStartStop(t *testing.T) {
	log := filepath.Join(t.TempDir(), "logs", "sh.log")
	p, err := Start("sh", log, "/bin/sh", "-c", "echo started; sleep 600 & wait")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b, _ := os.ReadFile(log); !strings.Contains(string(b), "started"); b, _ = os.ReadFile(log) {
		if time.Now().After(deadline) {
			t.Fatalf("log %q", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p.Exited() {
		t.Fatal("exited early")
	}
	p.Stop(5 * time.Second)
	if !p.Exited() {
		t.Fatal("still running after Stop")
	}
	// The orphaned sleep is reaped by init a moment later.
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(-p.Pid(), 0) != syscall.ESRCH; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the process group is still there 5 s after Stop")
		}
	}
}

// Run returns the output, and on failure an error that holds it; the time bound kills.
func TestRun(t *testing.T) {
	out, err := Run(context.Background(), 10*time.Second, t.TempDir(), []string{"RUNNER_TEST=x"}, "/bin/sh", "-c", "echo $RUNNER_TEST; pwd")
	if err != nil || !strings.HasPrefix(out, "x\n") {
		t.Errorf("out %q, err %v", out, err)
	}
	if _, err := Run(context.Background(), 10*time.Second, "", nil, "/bin/sh", "-c", "echo oops; exit 3"); err == nil || !strings.Contains(err.Error(), "oops") {
		t.Errorf("err %v", err)
	}
	begin := time.Now()
	if _, err := Run(context.Background(), 200*time.Millisecond, "", nil, "sleep", "60"); err == nil || time.Since(begin) > 10*time.Second {
		t.Errorf("err %v after %v", err, time.Since(begin))
	}
	if got := Tail("abcdef", 3); got != "...def" {
		t.Errorf("Tail %q", got)
	}
}
