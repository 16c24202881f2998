//go:build linux

// Package cgroupid says whose a cgroup is: the record of one watched cgroup as the cgroup
// source publishes it (Cgroup: path, identity, kind, Kubernetes names, what discovery read),
// and what a cgroup path tells about the workload in it (Locate: pod, container, sandbox,
// CRI-O's conmon, below a container; QoS class and runtime-prefixed container id), as the
// kubelet and the container runtimes lay paths out. It reads no files.
package cgroupid
