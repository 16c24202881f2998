//go:build linux

package collector

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
)

// discoveryMaxAge lets the collectors of one scrape (cpu, memory, the process source) share
// one walk of the hierarchies, while a scrape a few seconds later sees new cgroups.
const discoveryMaxAge = 500 * time.Millisecond

// settingsMaxAge: weight, shares, burst and cpuset change only when someone resizes the
// container; re-reading them every scrape was a quarter of the scrape's file reads. The quota
// itself (cpu.max) is read every scrape by discovery.
const settingsMaxAge = 30 * time.Second

// discoveryErrors is the collector label under which the cgroup source counts the
// directories its walk could not read, whatever collectors are enabled.
const discoveryErrors = "discovery"

// CgroupSource discovers the watched cgroups and caches their slowly changing CPU settings;
// shared by the cpu, memory, throttle and jvm collectors and the process source. Each fresh
// walk forgets the settings of cgroups that are gone.
type CgroupSource struct {
	layout *cgroupfs.Layout
	opts   cgroupfs.WalkOptions
	errors *ErrorCounter

	// maxAge is discoveryMaxAge: the collectors of one scrape share one walk.
	maxAge time.Duration

	mu       sync.Mutex
	at       time.Time
	cached   []cgroupfs.Cgroup
	walkErrs []cgroupfs.WalkError

	settingsMu sync.Mutex
	settings   map[string]cpuSettings // by cgroup path
}

// NewCgroupSource reads the hierarchy layout from mountinfo.
func NewCgroupSource(cfg Config, logger *slog.Logger, errs *ErrorCounter) (*CgroupSource, error) {
	layout, err := cgroupfs.ReadLayout(cfg.ProcPath, cfg.SysPath)
	if err != nil {
		return nil, err
	}
	if layout.MalformedMountLines > 0 {
		logger.Warn("skipped malformed mountinfo lines", "count", layout.MalformedMountLines)
	}
	if layout.OutsideNamespace {
		logger.Info("cgroup mounts lie outside the exporter's cgroup namespace; treating them as the host hierarchy (host /sys/fs/cgroup mounted into a container)")
	}
	logger.Info("cgroup layout", "layout", layout.String())
	bare := cfg.BareContainerRuntime
	if bare == "" {
		bare = cgroupfs.RuntimeContainerd
	}
	return &CgroupSource{
		layout:   layout,
		opts:     cgroupfs.WalkOptions{Keep: pathFilter(cfg.CgroupInclude, cfg.CgroupExclude), BareRuntime: bare},
		errors:   errs,
		maxAge:   discoveryMaxAge,
		settings: map[string]cpuSettings{},
	}, nil
}

// Layout is the hierarchy layout found at start.
func (s *CgroupSource) Layout() *cgroupfs.Layout { return s.layout }

// Cgroups returns the watched cgroups, walking the hierarchies at most every discoveryMaxAge.
// The walk's unreadable directories are counted here (collector "discovery") and returned
// with the list, so a collector can mark itself failed.
func (s *CgroupSource) Cgroups(ctx context.Context) ([]cgroupfs.Cgroup, []cgroupfs.WalkError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cached != nil && time.Since(s.at) < s.maxAge {
		return s.cached, s.walkErrs
	}
	cgs, errs := s.layout.Discover(ctx, s.opts)
	for _, we := range errs {
		s.errors.Record(discoveryErrors, we.Path, we.Err)
	}
	if ctx.Err() != nil {
		return cgs, errs // incomplete: do not cache
	}
	s.cached, s.walkErrs, s.at = cgs, errs, time.Now()
	s.forgetSettings(cgs)
	return cgs, errs
}

// cpuSettings are the slowly changing CPU settings of a cgroup. A zero-valued Has* means the
// file does not exist (old kernel, v2 root).
type cpuSettings struct {
	at                           time.Time
	burstUS, weight              uint64
	shares                       uint64 // v1 cpu.shares as read (weight is converted from it)
	cpus                         int
	hasBurst, hasWeight, hasCPUs bool
	unreported                   error // of the last read, until the cpu collector takes it
}

// Settings returns the cached CPU settings of a cgroup, re-reading them when older than
// settingsMaxAge. The cpu collector and the JVM reader (which needs shares or weight) share
// them: one read of each file per 30 s. The read's error goes to the cpu collector (the
// first caller with report set), whoever read: it is counted once per read.
func (s *CgroupSource) Settings(cg cgroupfs.Cgroup, report bool) (cpuSettings, error) {
	s.settingsMu.Lock()
	defer s.settingsMu.Unlock() // held while reading: two readers of one cgroup read once
	st, ok := s.settings[cg.Path]
	if !ok || time.Since(st.at) >= settingsMaxAge {
		st, st.unreported = readCPUSettings(s.layout, cg)
	}
	var err error
	if report {
		err, st.unreported = st.unreported, nil
	}
	s.settings[cg.Path] = st
	return st, err
}

// forgetSettings drops the settings of cgroups that are gone.
func (s *CgroupSource) forgetSettings(cgs []cgroupfs.Cgroup) {
	seen := make(map[string]bool, len(cgs))
	for _, cg := range cgs {
		seen[cg.Path] = true
	}
	s.settingsMu.Lock()
	defer s.settingsMu.Unlock()
	for p := range s.settings {
		if !seen[p] {
			delete(s.settings, p)
		}
	}
}

func readCPUSettings(l *cgroupfs.Layout, cg cgroupfs.Cgroup) (cpuSettings, error) {
	st := cpuSettings{at: time.Now()}
	if l.CPU == nil {
		return st, nil
	}
	var errs []error
	optional := func(err error) bool {
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		return err == nil
	}
	dir := l.CPU.Dir(cg.Path)
	var err error
	if l.CPU.Version == 2 {
		st.burstUS, err = cgroupfs.ReadCPUBurstV2(dir)
		st.hasBurst = optional(err)
		st.weight, err = cgroupfs.ReadCPUWeightV2(dir)
		st.hasWeight = optional(err)
	} else {
		st.burstUS, err = cgroupfs.ReadCPUBurstV1(dir)
		st.hasBurst = optional(err)
		st.shares, err = cgroupfs.ReadCPUSharesV1(dir)
		st.weight, st.hasWeight = cgroupfs.SharesToWeight(st.shares), optional(err)
	}
	if l.CPUSet != nil {
		file := "cpuset.cpus"
		if l.CPUSet.Version == 2 {
			file = "cpuset.cpus.effective"
		}
		if d := l.CPUSet.Dir(cg.Path); d != "" {
			st.cpus, err = cgroupfs.ReadCpusetCount(filepath.Join(d, file))
			st.hasCPUs = optional(err) && st.cpus > 0
		}
	}
	return st, errors.Join(errs...)
}

func pathFilter(include, exclude *regexp.Regexp) func(string) bool {
	if include == nil && exclude == nil {
		return nil
	}
	return func(p string) bool {
		if include != nil && !include.MatchString(p) {
			return false
		}
		return exclude == nil || !exclude.MatchString(p)
	}
}
