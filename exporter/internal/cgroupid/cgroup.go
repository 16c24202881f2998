//go:build linux

package cgroupid

import "github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"

// Cgroup is one watched cgroup.
type Cgroup struct {
	Path string // from the hierarchy root, e.g. /kubepods/burstable/pod<uid>/<id>
	// Label is Path as a label value: cleaned, and unique among one walk's cgroups even where
	// two paths differ only in what cleaning replaces (tenantstr.Unique; set by the cgroup
	// source). Empty: tenantstr.Label(Path).
	Label    string
	Identity Identity
	// Kind is what the cgroup is to the kubelet and the runtimes (Locate): KindOther,
	// KindPod, KindContainer or KindSandbox; the other kinds are never watched.
	Kind Kind
	// Names are the Kubernetes names of Identity's pod or container: not in the path, the
	// exporter fills them from the kubelet's log directories (package kubenames).
	Names KubeNames
	// HasProcs: at least one process sits directly in it, or in a cgroup below a container
	// that is the container's own (KindBelowContainer), in some watched hierarchy.
	HasProcs bool
	// PIDs are those processes, listed by the walk from the process hierarchy (the cpu
	// hierarchy, else memory) so that the process listing need not open cgroup.procs a
	// second time. Discovery only; capped at MaxProcs (a WalkError says so).
	PIDs []int
	// InCPU, InMemory: the path exists in that controller's hierarchy.
	InCPU, InMemory bool
	// CPUMax and MemoryLimit (0 = unlimited) as discovery read them to select the cgroup, so
	// the collectors of the same scrape need not read them again. Has* false: not read (file
	// absent or malformed; the collector reads it itself and reports why).
	CPUMax         cgroupfs.CPUMax
	HasCPUMax      bool
	MemoryLimit    uint64
	HasMemoryLimit bool
	// Unlinked: a container of a pod the kubelet knows that the kubelet has not linked in its
	// log directory yet (it links a container just after the runtime started it), seen for
	// less than kubenames.LinkGrace. The cgroup source holds it back from the collectors so
	// that a container's series carry its name from the first (the OOM watcher watches it).
	Unlinked bool
	// ThrottleSubgroup is crun's "container" subgroup of this container's scope when it has a
	// CPU quota of its own (DiscoverAll only; "" otherwise). The kernel counts throttling in
	// the cpu.stat of the quota's own cgroup only, so the container's throttling counters are
	// also read there (CPUStat.MaxThrottling); its usage stays the scope's, which includes it.
	ThrottleSubgroup string
}

// OOMKillsWithDescendants tells whether a cgroup of kind k counts the OOM kills of its
// descendants as its own (memory.events): a container's (and a sandbox's) descendants are
// the container's (crun's subgroup, a tenant's nested cgroups; Locate) and never exported.
// Every other cgroup counts its own only (memory.events.local): its descendants with
// processes are exported and count theirs, so that each kill is counted once, at the cgroup
// exported for the victim, as v1's memory.oom_control counts it.
func OOMKillsWithDescendants(k Kind) bool { return k == KindContainer || k == KindSandbox }

// KubeNames name a Kubernetes pod or container; empty fields are unknown.
type KubeNames struct {
	Namespace, Pod, Container string
}
