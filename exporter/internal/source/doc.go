// Package source holds what the collectors share: the cgroup source (discovery walks of
// the cgroup hierarchies, published as snapshots, and the cgroups' slowly changing CPU
// settings) and the process source (the watched processes, their runtime detection and
// each reader's per-process state). Collectors turn what the sources found into metrics.
package source
