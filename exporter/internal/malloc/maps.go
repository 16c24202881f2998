package malloc

import (
	"bytes"
	"strconv"
	"strings"
)

// Mapping is one line of /proc/<pid>/maps.
type Mapping struct {
	Start, End uint64 // [Start, End)
	Perms      string // e.g. "rw-p"
	Inode      uint64
	Path       string // "" for anonymous memory
}

// Anonymous reports private anonymous memory. Names set with PR_SET_VMA_ANON_NAME (glibc
// 2.40's glibc.mem.decorate_maps names arenas "[anon: glibc: malloc arena]") still count.
func (m Mapping) Anonymous() bool {
	return m.Inode == 0 && (m.Path == "" || strings.HasPrefix(m.Path, "[anon:"))
}

// parseMapsLine parses "start-end perms offset dev inode   path"; the path may hold spaces.
func parseMapsLine(line []byte) (Mapping, bool) {
	var m Mapping
	var f [5][]byte
	rest := line
	for i := range f {
		rest = bytes.TrimLeft(rest, " ")
		j := bytes.IndexByte(rest, ' ')
		if j < 0 {
			if i < 4 {
				return m, false
			}
			j = len(rest)
		}
		f[i], rest = rest[:j], rest[j:]
	}
	lo, hi, ok := bytes.Cut(f[0], []byte{'-'})
	if !ok {
		return m, false
	}
	var err error
	if m.Start, err = strconv.ParseUint(string(lo), 16, 64); err != nil {
		return m, false
	}
	if m.End, err = strconv.ParseUint(string(hi), 16, 64); err != nil || m.End < m.Start {
		return m, false
	}
	if len(f[1]) != 4 {
		return m, false
	}
	m.Perms = string(f[1])
	if m.Inode, err = strconv.ParseUint(string(f[4]), 10, 64); err != nil {
		return m, false
	}
	m.Path = string(bytes.TrimLeft(rest, " "))
	return m, true
}
