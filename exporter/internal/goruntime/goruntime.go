// Package goruntime tells, from outside, whether a process is a Go binary and what GOMAXPROCS
// it runs with against its CPU quota. It reads the binary's build info through
// /proc/<pid>/exe, two environment variables and the affinity mask; it never attaches to or
// signals the process. A program calling runtime.GOMAXPROCS itself defeats the computation:
// the result is a strong expectation, not a reading.
package goruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/quota-exporter/quota_exporter/exporter/internal/execache"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
)

// AutoMaxProcsModule is the module whose presence means GOMAXPROCS follows the quota at start.
const AutoMaxProcsModule = "go.uber.org/automaxprocs"

// maxStatus caps the /proc/<pid>/status read (a few KiB in practice).
const maxStatus = 64 << 10

// ErrParse marks malformed procfs content or build info.
var ErrParse = errors.New("parse error")

// Info describes one process. For a non-Go process only IsGo (false) is set.
type Info struct {
	IsGo           bool
	GoVersion      string // toolchain that built the binary, e.g. "go1.26.8"
	MainModule     string // main module path ("" for binaries built without modules)
	DefaultGODEBUG string // build setting; holds containermaxprocs=0 for go.mod "go 1.24" and older
	AutoMaxProcs   bool   // go.uber.org/automaxprocs is among the deps
	ContainerAware bool   // AutoMaxProcs or the Go >= 1.25 cgroup-aware default is on
	Affinity       int    // CPUs in the affinity mask
	GOMAXPROCS     int    // expected effective value
	Source         Source // rule that decided GOMAXPROCS
}

// EnvKeys are the environment variables InspectKnown needs.
func EnvKeys() []string { return []string{"GOMAXPROCS", "GODEBUG"} }

// Known is what a caller that watches many processes has read already: the affinity from
// /proc/<pid>/status (AffinityErr non-nil when Cpus_allowed_list was absent or malformed) and
// a function returning the process's environment variables (at least EnvKeys), read once
// and shared with other readers.
type Known struct {
	Affinity    int
	AffinityErr error
	Env         func() (map[string]string, error)
	// Builds keeps what was read of each executable's build info, shared by its processes
	// (nil: read it each time).
	Builds *execache.Cache[Build]
}

// InspectKnown is Inspect without reading status or environ again.
func InspectKnown(ctx context.Context, procfs string, pid int, k Known, cpu CPUQuota) (*Info, error) {
	return inspect(ctx, procfs, pid, cpu, func() (int, error) {
		if k.AffinityErr != nil {
			return 0, fmt.Errorf("%w: Cpus_allowed_list: %v", ErrParse, k.AffinityErr)
		}
		return k.Affinity, nil
	}, k.Env, k.Builds)
}

func inspect(ctx context.Context, procfs string, pid int, cpu CPUQuota, affinity func() (int, error), environ func() (map[string]string, error), builds *execache.Cache[Build]) (*Info, error) {
	dir := filepath.Join(procfs, strconv.Itoa(pid))
	bi, err := readBuild(ctx, filepath.Join(dir, "exe"), builds)
	if err != nil {
		return nil, fmt.Errorf("pid %d: go build info: %w", pid, classify(err))
	}
	if !bi.Go {
		return &Info{}, nil
	}
	info := &Info{
		IsGo:           true,
		GoVersion:      bi.GoVersion,
		MainModule:     bi.MainModule,
		DefaultGODEBUG: bi.DefaultGODEBUG,
		AutoMaxProcs:   bi.AutoMaxProcs,
	}

	env, err := environ()
	if err != nil {
		return nil, fmt.Errorf("pid %d: environ: %w", pid, classify(err))
	}
	info.Affinity, err = affinity()
	if err != nil {
		return nil, fmt.Errorf("pid %d: affinity: %w", pid, classify(err))
	}
	maxprocs, set := env["GOMAXPROCS"]
	r := Compute(Inputs{
		GoVersion:        info.GoVersion,
		AutoMaxProcs:     info.AutoMaxProcs,
		DefaultGODEBUG:   info.DefaultGODEBUG,
		EnvGOMAXPROCS:    maxprocs,
		EnvGOMAXPROCSSet: set,
		EnvGODEBUG:       env["GODEBUG"],
		CPU:              cpu,
		Affinity:         info.Affinity,
	})
	info.ContainerAware, info.GOMAXPROCS, info.Source = r.ContainerAware, r.GOMAXPROCS, r.Source
	return info, nil
}

// readBuild reads the build info of the executable exe (Build{} when it is not Go). It reads
// the few bounded structures it needs (ReadBuild), never more than MaxBinarySize's worth of
// file, and skips larger executables. Opening exe here keeps open errors (permission,
// vanished) apart from format errors. builds (nil: none) keeps the result by the file's
// identity.
func readBuild(ctx context.Context, exe string, builds *execache.Cache[Build]) (Build, error) {
	return procread.Do(ctx, func() (Build, error) {
		f, err := os.Open(exe)
		if err != nil {
			return Build{}, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil {
			return Build{}, err
		} else if !fi.Mode().IsRegular() {
			return Build{}, nil
		} else if fi.Size() > MaxBinarySize {
			return Build{}, fmt.Errorf("%w: executable of %d bytes, above the %d-byte inspection cap", ErrParse, fi.Size(), MaxBinarySize)
		}
		id, known := execache.IDOf(f)
		if known {
			if b, ok := builds.Get(id); ok {
				return b, nil
			}
		}
		b, err := ReadBuild(f)
		if err == nil && known {
			builds.Add(id, b)
		}
		return b, err
	})
}

// classify makes "process gone" errors that do not already do so match os.ErrNotExist.
func classify(err error) error { return kernel.Vanished(err) }
