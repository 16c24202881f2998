//go:build linux

package cgroups

import "github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"

// Namer gives one walk's cgroups their Kubernetes names (and tells sandboxes from
// containers, which needs the pod's other cgroups).
type Namer interface {
	Name(cgs []cgroupid.Cgroup)
}

// Counted wraps an error that has been counted already (a walk error, kept in the source's
// ReadErrors when the walk found it): the read-error counter classifies it but does not count
// or log it again.
type Counted struct{ Err error }

func (c Counted) Error() string { return c.Err.Error() }
func (c Counted) Unwrap() error { return c.Err }
