// Package cgroupfs reads cgroup v1 and v2 files into typed values, in the style of
// prometheus/procfs (which parses no cgroup files): a FS rooted at a path, one reader per
// file, errors that say which file and why. It also finds the hierarchies from mountinfo,
// walks them, and derives Kubernetes and container identities from cgroup paths.
package cgroupfs
