//go:build linux

package cgroupfs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Hierarchy is one mounted cgroup hierarchy: a v1 controller's or the v2 unified tree.
type Hierarchy struct {
	Version    int    // 1 or 2
	MountPoint string // directory to read, in the exporter's mount namespace
	// root is the cgroup path the mount point shows. It is "/" when the mount shows the
	// whole hierarchy, and also when mountinfo shows it as lying outside the exporter's cgroup
	// namespace ("/.."): that is the host's /sys/fs/cgroup mounted into a container, whose
	// tree *is* the host hierarchy.
	root string
}

// Dir is the directory of a cgroup path in this hierarchy ("" if the mount cannot reach it).
func (h *Hierarchy) Dir(path string) string {
	rel, ok := strings.CutPrefix(path, h.root)
	if !ok || (h.root != "/" && rel != "" && rel[0] != '/') {
		return ""
	}
	return filepath.Join(h.MountPoint, rel)
}

// Path is the cgroup path of a directory below the mount point.
func (h *Hierarchy) Path(dir string) string {
	rel, err := filepath.Rel(h.MountPoint, dir)
	if err != nil || rel == "." {
		return h.root
	}
	return filepath.Join(h.root, rel)
}

// Layout says where each controller this exporter reads is mounted.
type Layout struct {
	// Mode is "v1", "v2" or "hybrid" (v1 controllers plus a v2 tree without them).
	Mode string
	// CPU holds the quota files (v1 cpu, or v2); CPUAcct the v1 usage split (nil on v2:
	// cpu.stat has it); CPUSet and Memory their controllers.
	CPU, CPUAcct, CPUSet, Memory *Hierarchy
	// Unified is the v2 mount, also on hybrid hosts.
	Unified *Hierarchy
	// OutsideNamespace is set when a mount lies outside the exporter's cgroup namespace
	// (a host /sys/fs/cgroup bind-mounted into a container).
	OutsideNamespace bool
	// MalformedMountLines counts mountinfo lines that could not be parsed.
	MalformedMountLines int
}

// ErrNoCgroups means mountinfo lists no cgroup mount with a cpu or memory controller.
var ErrNoCgroups = errors.New("no cgroup hierarchy with cpu or memory found in mountinfo")

// maxMountInfo caps the mountinfo read; a truncated file still yields the mounts before the cap.
const maxMountInfo = 16 << 20

// ReadLayout finds the hierarchies in <procPath>/self/mountinfo. When a controller is
// mounted more than once (a host tree under --path.rootfs and again under --path.sysfs),
// the mount under <sysPath>/fs/cgroup wins, then the one showing the most of the tree.
func ReadLayout(procPath, sysPath string) (*Layout, error) {
	// A host with 10 000 mounts has about 1.5 MiB of mountinfo.
	data, err := readAllCapped(filepath.Join(procPath, "self", "mountinfo"), maxMountInfo)
	if err != nil && !errors.Is(err, ErrTruncated) {
		return nil, err
	}
	mounts, malformed := ParseMountInfo(data)
	l := LayoutFromMounts(mounts, filepath.Join(sysPath, "fs", "cgroup"))
	l.MalformedMountLines = malformed
	if l.CPU == nil && l.Memory == nil {
		return l, ErrNoCgroups
	}
	return l, nil
}

// LayoutFromMounts chooses the hierarchies from parsed mounts.
func LayoutFromMounts(mounts []Mount, preferUnder string) *Layout {
	l := &Layout{}
	best := map[string]Mount{}
	better := func(a, b Mount) bool { // is a a better choice than b?
		ua, ub := under(a.MountPoint, preferUnder), under(b.MountPoint, preferUnder)
		if ua != ub {
			return ua
		}
		return len(normalRoot(a.Root)) < len(normalRoot(b.Root))
	}
	for _, m := range mounts {
		keys := m.Controllers
		if m.FSType == "cgroup2" {
			keys = []string{"<v2>"}
		}
		for _, k := range keys {
			if cur, ok := best[k]; !ok || better(m, cur) {
				best[k] = m
			}
		}
	}
	mk := func(key string, version int) *Hierarchy {
		m, ok := best[key]
		if !ok {
			return nil
		}
		if strings.Contains(m.Root, "/..") {
			l.OutsideNamespace = true
		}
		return &Hierarchy{Version: version, MountPoint: m.MountPoint, root: normalRoot(m.Root)}
	}
	l.Unified = mk("<v2>", 2)
	l.CPU, l.CPUAcct, l.CPUSet, l.Memory = mk("cpu", 1), mk("cpuacct", 1), mk("cpuset", 1), mk("memory", 1)
	v1 := l.CPU != nil || l.Memory != nil
	switch {
	case v1 && l.Unified != nil:
		l.Mode = "hybrid"
	case v1:
		l.Mode = "v1"
	case l.Unified != nil:
		l.Mode = "v2"
		l.CPU, l.CPUSet, l.Memory = l.Unified, l.Unified, l.Unified
	}
	return l
}

func normalRoot(root string) string {
	if root == "" || strings.Contains(root, "/..") {
		return "/"
	}
	return filepath.Clean(root)
}

func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// String describes the layout for the startup log.
// ProcessHierarchy is the hierarchy whose cgroup.procs the exporter lists processes from:
// cpu, else memory (v1 hosts may mount only one of them); nil when neither is mounted.
func (l *Layout) ProcessHierarchy() *Hierarchy {
	if l.CPU != nil {
		return l.CPU
	}
	return l.Memory
}

func (l *Layout) String() string {
	desc := func(h *Hierarchy) string {
		if h == nil {
			return "none"
		}
		return fmt.Sprintf("v%d:%s", h.Version, h.MountPoint)
	}
	return fmt.Sprintf("mode=%s cpu=%s cpuacct=%s cpuset=%s memory=%s", l.Mode, desc(l.CPU), desc(l.CPUAcct), desc(l.CPUSet), desc(l.Memory))
}
