package collector

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/processes"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// A panic while parsing one process's file (a parser bug on a tenant's crafted input) costs
// that process's series only: the worker recovers, read_errors_total{reason="panic"} counts
// it, one line is logged, and every other process is read.
func TestPanicInProcessReaderCostsOneProcess(t *testing.T) {
	testutil.RequireRoot(t)
	root := memTempDir(t)
	processHost(t, root, 8)
	var logged bytes.Buffer
	env, err := NewEnv(Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys"), ThrottleWindow: time.Second},
		slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	procs, errs := env.Processes.Processes(context.Background())
	if len(procs) < 2 {
		t.Fatalf("fixture processes: %d, %v", len(procs), errs)
	}
	bad := procs[len(procs)/2].PID
	res := processes.Each(context.Background(), env.Processes, procs, "panic test", func(_ context.Context, p *processes.Process) (int, error) {
		if p.PID == bad {
			var m map[string]int
			m["crafted"]++ //nolint:staticcheck // a nil map write: a runtime panic, as a parser bug would raise
		}
		return p.PID, nil
	})
	tl := newProcessTally("jvm", env.Errors)
	read := 0
	for i, r := range res {
		if tl.add(fmt.Sprintf("pid %d", procs[i].PID), r.Err) {
			if procs[i].PID != bad {
				t.Errorf("pid %d: %v", procs[i].PID, r.Err)
			}
			continue
		}
		read++
	}
	if read != len(procs)-1 {
		t.Errorf("read %d of %d processes, want all but the panicking one", read, len(procs))
	}
	if n := errorCount(t, env, "jvm", "panic"); n != 1 {
		t.Errorf(`read_errors_total{reason="panic"} = %v, want 1`, n)
	}
	if n := strings.Count(logged.String(), "reason=panic"); n != 1 {
		t.Errorf("logged %d lines about the panic, want 1:\n%s", n, logged.String())
	}
	if tl.err() == nil {
		t.Error("a panic is not a tolerated reason: the collector must report it failed")
	}
}
