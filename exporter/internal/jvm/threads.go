package jvm

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// ThreadKind is what a JVM thread does, from its name.
type ThreadKind string

// Thread kinds.
const (
	ThreadGC  ThreadKind = "gc"
	ThreadJIT ThreadKind = "jit"
	ThreadVM  ThreadKind = "vm"
	ThreadApp ThreadKind = "app"
)

// Thread names as /proc/<pid>/task/<tid>/comm shows them (15 bytes), JDK 8 late updates to 25.
// Prefixes end where the name becomes variable or is truncated.
var gcPrefixes = []string{
	"GC Thread#", "ParGC Thread#", // G1, Parallel (11: ParGC), CMS workers
	"G1 Main Marker", "G1 Conc#", "G1 Refine#", "G1 Service", "G1 Young RemSet", "G1 Uncommit",
	"CMS Main Thread", "CMS Thread#",
	// ZGC 11/17; 21 non-generational is X-prefixed; generational 21/25
	"ZDirector", "ZDriver", "ZStat", "ZWorker", "ZUncommitter", "ZUnmapper", "RuntimeWorker#",
	"XDirector", "XDriver", "XStat", "XWorker", "XUncommitter", "XUnmapper",
	"Shenandoah GC T", "Shenandoah Cont", "ShenandoahContr", "Shenandoah Unco",
	// JDK 8 late updates
	"GC task thread#", "Gang worker#", "Concurrent Mark", "Surrogate Locke",
}

var jitPrefixes = []string{"C1 CompilerThre", "C2 CompilerThre", "JVMCI CompilerT", "JVMCI-native Co", "Sweeper thread"}

var vmNames = map[string]bool{
	"VM Thread": true, "VM Periodic Tas": true, "Reference Handl": true, "Finalizer": true,
	"Signal Dispatch": true, "Service Thread": true, "Common-Cleaner": true, "Monitor Deflati": true,
	"Notification Th": true, "Attach Listener": true, "Safepoint Clean": true, "JFR Periodic Ta": true,
	"JFR Recorder Th": true, "JFR Recording S": true,
}

// ClassifyThread sorts a JVM thread by its comm name into gc, jit, vm (VM and JDK
// infrastructure) or app (everything else, including the main thread "java").
func ClassifyThread(comm string) ThreadKind {
	comm = strings.TrimRight(comm, "\n")
	for _, p := range gcPrefixes {
		if strings.HasPrefix(comm, p) {
			return ThreadGC
		}
	}
	for _, p := range jitPrefixes {
		if strings.HasPrefix(comm, p) {
			return ThreadJIT
		}
	}
	if vmNames[comm] {
		return ThreadVM
	}
	return ThreadApp
}

// ThreadCounts counts threads per kind.
type ThreadCounts map[ThreadKind]int

// maxTasks bounds the walk of a process with a runaway thread count.
const maxTasks = 100000

// ClassifyThreads counts thread names by kind.
func ClassifyThreads(names []string) ThreadCounts {
	out := ThreadCounts{}
	for _, n := range names {
		out[ClassifyThread(n)]++
	}
	return out
}

// ThreadNames reads the name of every thread of pid from <procfs>/<pid>/task/*/comm, bounded
// by ctx (procread). Threads that exit during the walk are skipped.
func ThreadNames(ctx context.Context, procfs string, pid int) ([]string, error) {
	dir := filepath.Join(procfs, strconv.Itoa(pid), "task")
	return procread.Do(ctx, func() ([]string, error) {
		d, err := os.Open(dir)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		tids, err := d.Readdirnames(maxTasks)
		if err != nil && len(tids) == 0 {
			return nil, err
		}
		out := make([]string, 0, len(tids))
		var buf [64]byte
		for _, tid := range tids {
			f, err := os.Open(filepath.Join(dir, tid, "comm"))
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return nil, err
			}
			n, _ := f.Read(buf[:])
			f.Close()
			if n == 0 {
				continue
			}
			out = append(out, strings.TrimRight(string(buf[:n]), "\n"))
		}
		return out, nil
	})
}
