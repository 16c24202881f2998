//go:build linux

package cgroups

import "github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"

// Recorder counts and logs a skipped input (the exporter's read-error counter).
type Recorder interface {
	Record(collector, subject string, err error) string
}

// Namer gives one walk's cgroups their Kubernetes names (and tells sandboxes from
// containers, which needs the pod's other cgroups).
type Namer interface {
	Name(cgs []cgroupid.Cgroup)
}

// Counted wraps an error that has been counted already (a walk error of a cached discovery):
// a Recorder classifies it but does not count or log it again.
type Counted struct{ Err error }

func (c Counted) Error() string { return c.Err.Error() }
func (c Counted) Unwrap() error { return c.Err }
