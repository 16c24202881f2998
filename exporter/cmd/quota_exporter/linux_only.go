//go:build !linux

package main

// quota_exporter reads cgroup files and /proc: it runs on Linux only. This file stops builds
// for other systems with that message instead of an error deep in a dependency.
const _ = quota_exporter_is_Linux_only
