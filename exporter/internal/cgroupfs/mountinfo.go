//go:build linux

package cgroupfs

import (
	"bufio"
	"bytes"
	"strings"
)

// Mount is one cgroup mount from mountinfo.
type Mount struct {
	// Root is the directory of the hierarchy that is mounted, as the reader's cgroup
	// namespace shows it ("/" for a whole hierarchy; "/.." prefixes when the mount lies
	// outside the reader's namespace).
	Root string
	// MountPoint is where the hierarchy is mounted in the reader's mount namespace.
	MountPoint string
	// FSType is "cgroup" (v1) or "cgroup2".
	FSType string
	// Controllers are the v1 controllers of the mount (from the super options), e.g. cpu, cpuacct.
	Controllers []string
}

// ParseMountInfo returns the cgroup mounts in a mountinfo file. Malformed lines are
// skipped and counted rather than failing the whole file: one odd mount must not hide
// every cgroup.
func ParseMountInfo(data []byte) (mounts []Mount, malformed int) {
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(make([]byte, 0, 4096), 1<<20)
	for s.Scan() {
		line := s.Text()
		if line == "" {
			continue
		}
		m, ok := parseMountInfoLine(line)
		if !ok {
			malformed++
			continue
		}
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			mounts = append(mounts, m)
		}
	}
	if s.Err() != nil {
		malformed++
	}
	return mounts, malformed
}

// parseMountInfoLine parses "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue".
func parseMountInfoLine(line string) (Mount, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return Mount{}, false
	}
	f := strings.Fields(pre)
	if len(f) < 6 {
		return Mount{}, false
	}
	g := strings.Fields(post)
	if len(g) < 2 {
		return Mount{}, false
	}
	m := Mount{Root: unescapeOctal(f[3]), MountPoint: unescapeOctal(f[4]), FSType: g[0]}
	if m.Root == "" || m.MountPoint == "" || m.Root[0] != '/' || m.MountPoint[0] != '/' {
		return Mount{}, false
	}
	if len(g) >= 3 && m.FSType == "cgroup" {
		for _, opt := range strings.Split(g[2], ",") {
			switch opt {
			case "rw", "ro", "":
			default:
				if !strings.Contains(opt, "=") || strings.HasPrefix(opt, "name=") {
					m.Controllers = append(m.Controllers, opt)
				}
			}
		}
	}
	return m, true
}

// unescapeOctal undoes the kernel's \040-style escaping of spaces, tabs, newlines and backslashes.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return s[0] <= '3'
}
