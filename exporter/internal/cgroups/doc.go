// Package cgroups is the cgroup source the collectors share: discovery walks of the cgroup
// hierarchies (DiscoverAll: getdents, then each directory's cgroup.procs, quota and limit, the
// quotas and limits of directories not exported kept between walks in a ProbeCache),
// published as immutable snapshots (Source.Snapshot) with each cgroup's binding limit
// (Bindings) to scrapes and to the subscribers that follow them (the throttling sampler, the
// OOM watcher), the one rediscovery schedule, and the cgroups' slowly changing CPU settings.
// Package cgroupfs reads the files, package cgroupid says whose each cgroup is; collectors
// turn what the source found into metrics.
package cgroups
