// Package cgroups is the cgroup source the collectors share: discovery walks of the cgroup
// hierarchies, published as immutable snapshots (Source.Snapshot) to scrapes and to the
// subscribers that follow them (the throttling sampler, the OOM watcher), the one
// rediscovery schedule, and the cgroups' slowly changing CPU settings. Package cgroupfs
// reads the files; collectors turn what the source found into metrics.
package cgroups
