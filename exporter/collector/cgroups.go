package collector

import (
	"context"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
)

// discoveryMaxAge lets the collectors of one scrape (cpu, memory, process) share one walk
// of the hierarchies, while a scrape a few seconds later sees new cgroups.
const discoveryMaxAge = 500 * time.Millisecond

// CgroupSource discovers the watched cgroups, shared by all collectors.
type CgroupSource struct {
	layout *cgroupfs.Layout
	opts   cgroupfs.WalkOptions
	logger *slog.Logger

	maxAge time.Duration
	// errors, if set, counts each walk error once, when the walk finds it; the errors are
	// returned marked as counted, so a collector that reports them (and the cached list
	// served again) does not count them again.
	errors *ErrorCounter

	mu       sync.Mutex
	at       time.Time
	valid    bool // an empty list is a result too
	cached   []cgroupfs.Cgroup
	walkErrs []cgroupfs.WalkError
}

// NewCgroupSource reads the hierarchy layout from mountinfo.
func NewCgroupSource(cfg Config, logger *slog.Logger) (*CgroupSource, error) {
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
		layout: layout,
		opts:   cgroupfs.WalkOptions{Keep: pathFilter(cfg.CgroupInclude, cfg.CgroupExclude), BareRuntime: bare},
		logger: logger,
		maxAge: discoveryMaxAge,
	}, nil
}

// Layout is the hierarchy layout found at start.
func (s *CgroupSource) Layout() *cgroupfs.Layout { return s.layout }

// Cgroups returns the watched cgroups, walking the hierarchies at most every discoveryMaxAge.
// The walk's unreadable directories are returned with the list.
func (s *CgroupSource) Cgroups(ctx context.Context) ([]cgroupfs.Cgroup, []cgroupfs.WalkError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.valid && time.Since(s.at) < s.maxAge {
		return s.cached, s.walkErrs
	}
	cgs, errs := s.layout.Discover(ctx, s.opts)
	if s.errors != nil {
		for i, we := range errs {
			s.errors.Record("cpu", we.Path, we.Err)
			errs[i].Err = counted{we.Err}
		}
	}
	if ctx.Err() != nil {
		return cgs, errs // incomplete: do not cache
	}
	s.cached, s.walkErrs, s.at, s.valid = cgs, errs, time.Now(), true
	return cgs, errs
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
