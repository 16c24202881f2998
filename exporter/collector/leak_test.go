package collector

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/processes"
)

// runtimeCollectorNames are the collectors that read per-process state.
var runtimeCollectorNames = []string{"process", "go", "jvm", "malloc", "smaps"}

// TestExitedProcessesLeaveNothing: with each runtime collector disabled in turn, processes
// that exit leave nothing in any reader after the next scrape (the process source's states
// and the JVM reader's cache; before, the JVM reader kept exited JVMs with --no-collector.jvm).
func TestExitedProcessesLeaveNothing(t *testing.T) {
	for _, off := range runtimeCollectorNames {
		t.Run("no-"+off, func(t *testing.T) {
			root := memTempDir(t)
			counts := processHost(t, root, 25)
			env, err := NewEnv(Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys"),
				ThrottleWindow: time.Second, ProcessMinResident: 64 << 20, SmapsInterval: time.Minute}, discardLogger())
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, n := range runtimeCollectorNames {
				if n != off {
					names = append(names, n)
				}
			}
			reg, set := collectorSet(t, env, names)
			defer set.Close()
			scrapeOnce(t, env, reg)
			src := env.Processes
			if src.Len() < counts.jvms+counts.goProcs || src.JVM.Len() != counts.jvms {
				t.Fatalf("before exit: %d process states, %d JVM entries; want >= %d and %d",
					src.Len(), src.JVM.Len(), counts.jvms+counts.goProcs, counts.jvms)
			}
			// Every process exits: cgroup.procs lists nobody, /proc/<pid> is gone.
			exitAll(t, root)
			scrapeOnce(t, env, reg)
			if src.Len() != 0 || src.JVM.Len() != 0 {
				t.Errorf("after exit: %d process states, %d JVM entries left", src.Len(), src.JVM.Len())
			}
		})
	}
	if !slices.Contains(runtimeCollectorNames, "jvm") {
		t.Fatal("jvm collector not covered")
	}
}

// exitAll empties every cgroup.procs of a fixture host and removes its /proc/<pid> dirs.
func exitAll(t *testing.T, root string) {
	t.Helper()
	_ = filepath.WalkDir(filepath.Join(root, "sys"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "cgroup.procs" {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	ents, _ := os.ReadDir(filepath.Join(root, "proc"))
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			if err := os.RemoveAll(filepath.Join(root, "proc", e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestExecForgetsJVM: a JVM that execs into another program keeps its pid and start time;
// the next listing forgets it in the JVM reader and detects the new program.
func TestExecForgetsJVM(t *testing.T) {
	root := memTempDir(t)
	counts := processHost(t, root, 25)
	env, err := NewEnv(Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys"),
		ThrottleWindow: time.Second, ProcessMinResident: 64 << 20}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := collectorSet(t, env, []string{"process", "jvm"})
	scrapeOnce(t, env, reg)
	if env.Processes.JVM.Len() != counts.jvms {
		t.Fatalf("%d JVM entries, want %d", env.Processes.JVM.Len(), counts.jvms)
	}
	procs, _ := env.Processes.Processes(context.Background())
	var jvmPID int
	for _, p := range procs {
		if p.Runtime == processes.RuntimeJVM {
			jvmPID = p.PID
			break
		}
	}
	// exec: same pid and start time, another comm.
	statPath := filepath.Join(root, "proc", strconv.Itoa(jvmPID), "stat")
	b, err := os.ReadFile(statPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statPath, []byte(strings.Replace(string(b), "(java)", "(bash)", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "proc", strconv.Itoa(jvmPID), "exe")); err != nil {
		t.Fatal(err)
	}
	scrapeOnce(t, env, reg)
	if n := env.Processes.JVM.Len(); n != counts.jvms-1 {
		t.Errorf("after exec: %d JVM entries, want %d", n, counts.jvms-1)
	}
	procs, _ = env.Processes.Processes(context.Background())
	for _, p := range procs {
		if p.PID == jvmPID && p.Runtime == processes.RuntimeJVM {
			t.Errorf("pid %d still a JVM after exec", jvmPID)
		}
	}
}
