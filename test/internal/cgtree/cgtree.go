// Package cgtree turns cgroup files copied from a real kernel into committed fixture hosts of
// the exporter's unit tests (exporter/collector/testdata/hosts/<name>: sys/fs/cgroup/... and
// proc/self/mountinfo), and compares a fresh copy with the committed one by shape: the same
// files, each of the same format, whatever the figures.
package cgtree

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Files are a dump's files by path relative to the cgroup2 mount ("./cpu.stat" for the root's).
type Files map[string]string

// DumpScript prints every file a v2 collector reads of each cgroup below the given
// directories (relative to /sys/fs/cgroup, "." for the root alone) as "--- PATH" + content.
// vm.Files parses its output. Files are read with the shell's own read and printf, one find
// for the directories: under software emulation a process per file took minutes.
const DumpScript = `cd /sys/fs/cgroup || exit 1
for top in "$@"; do
	if [ "$top" = . ]; then dirs=.; else dirs=$(find "$top" -type d); fi
	for d in $dirs; do
		for f in cgroup.controllers cgroup.procs cgroup.subtree_control cpu.pressure memory.pressure cpu.stat cpu.max cpu.max.burst cpu.weight cpuset.cpus.effective memory.current memory.max memory.high memory.peak memory.stat memory.events memory.events.local; do
			[ -f "$d/$f" ] && [ -r "$d/$f" ] || continue
			printf -- '--- %s\n' "$d/$f"
			while IFS= read -r line || [ -n "$line" ]; do printf '%s\n' "$line"; done < "$d/$f"
		done
	done
done
`

// Host lays a dump out as a fixture host: files under sys/fs/cgroup, process ids renumbered
// in path order from 100 (they differ from boot to boot), and the cgroup mounts of mountinfo
// under the tree's placeholder root (fixture.RootPlaceholder).
func Host(files Files, mountinfo string) map[string]string {
	out := map[string]string{}
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	next := 100
	for _, k := range keys {
		content := files[k]
		if strings.HasSuffix(k, "/cgroup.procs") {
			var b strings.Builder
			for _, line := range strings.Fields(content) {
				if _, err := strconv.Atoi(line); err == nil {
					b.WriteString(strconv.Itoa(next) + "\n")
					next++
				}
			}
			content = b.String()
		}
		out[filepath.Join("sys", "fs", "cgroup", strings.TrimPrefix(k, "./"))] = content
	}
	var mi strings.Builder
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || !strings.Contains(line, " - cgroup") {
			continue
		}
		f[4] = "@ROOT@" + f[4]
		mi.WriteString(strings.Join(f, " ") + "\n")
	}
	out[filepath.Join("proc", "self", "mountinfo")] = mi.String()
	return out
}

// Read reads a committed tree: relative path -> content.
func Read(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	return out, err
}

// Write replaces dir with files.
func Write(dir string, files map[string]string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

var digits = regexp.MustCompile(`[0-9]+`)

// Format is a file's shape without its figures: each line with its numbers as N (keys, PSI
// fields, "max N" and cpu lists keep their form); process lists only say whether they are
// empty. Mount ids and options vary with the kernel, so mountinfo says which file systems it
// mounts where.
func Format(rel, content string) string {
	switch {
	case strings.HasSuffix(rel, "cgroup.procs"):
		if strings.TrimSpace(content) == "" {
			return "no processes"
		}
		return "processes"
	case strings.HasSuffix(rel, "mountinfo"):
		var b strings.Builder
		for _, line := range strings.Split(strings.TrimSpace(content), "\n") {
			f := strings.Fields(line)
			if len(f) >= 10 {
				b.WriteString(f[4] + " " + f[len(f)-3] + "\n")
			}
		}
		return b.String()
	}
	return digits.ReplaceAllString(content, "N")
}

// Diff lists how got (a fresh copy) differs from committed in files and formats, one line
// each, sorted; none means they match.
func Diff(got, committed map[string]string) []string {
	var out []string
	for rel, content := range got {
		c, ok := committed[rel]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("the real tree has %s, the committed fixture not", rel))
		case Format(rel, c) != Format(rel, content):
			out = append(out, fmt.Sprintf("%s: committed format\n%s\nthe real tree's\n%s", rel, Format(rel, c), Format(rel, content)))
		}
	}
	for rel := range committed {
		if _, ok := got[rel]; !ok {
			out = append(out, fmt.Sprintf("the committed fixture has %s, the real tree not", rel))
		}
	}
	sort.Strings(out)
	return out
}
