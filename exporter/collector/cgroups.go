package collector

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
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
	valid    bool  // an empty list is a result too
	walking  *walk // the discovery in progress, if any
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
// The walk's unreadable directories are returned with the list. Concurrent callers share
// one walk, and each waits for it only until its own ctx ends (then it gets no cgroups and
// a timeout): no caller waits on a lock held across the walk's system calls.
func (s *CgroupSource) Cgroups(ctx context.Context) ([]cgroupfs.Cgroup, []cgroupfs.WalkError) {
	s.mu.Lock()
	if s.valid && time.Since(s.at) < s.maxAge {
		defer s.mu.Unlock()
		return s.cached, s.walkErrs
	}
	w := s.walking
	if w == nil {
		w = &walk{done: make(chan struct{})}
		s.walking = w
		go s.runWalk(ctx, w)
	}
	s.mu.Unlock()
	select {
	case <-w.done:
		return w.cgs, w.errs
	case <-ctx.Done():
		return nil, []cgroupfs.WalkError{{Path: "/", Err: counted{fmt.Errorf("waiting for cgroup discovery: %w", procread.ErrTimeout)}}}
	}
}

// walk is one discovery shared by the callers that arrive while it runs.
type walk struct {
	done chan struct{}
	cgs  []cgroupfs.Cgroup
	errs []cgroupfs.WalkError
}

func (s *CgroupSource) runWalk(ctx context.Context, w *walk) {
	cgs, errs := s.layout.Discover(ctx, s.opts)
	if s.errors != nil {
		for i, we := range errs {
			s.errors.Record("cpu", we.Path, we.Err)
			errs[i].Err = counted{we.Err}
		}
	}
	w.cgs, w.errs = cgs, errs
	s.mu.Lock()
	s.walking = nil
	if ctx.Err() == nil { // incomplete walks are not cached
		s.cached, s.walkErrs, s.at, s.valid = cgs, errs, time.Now(), true
	}
	s.mu.Unlock()
	close(w.done)
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
