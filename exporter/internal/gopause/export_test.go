//go:build linux && amd64

package gopause

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// ProgramsOf exposes a tracer's BPF programs to the tests (run-time statistics).
func ProgramsOf(t *Tracer) map[string]*ebpf.Program {
	return map[string]*ebpf.Program{"stop_the_world": t.objs.StopTheWorld, "start_the_world": t.objs.StartTheWorld, "world_started": t.objs.WorldStarted}
}

// Files are the file names the kernel keeps for the attachment's uprobes (bpf_link info,
// Linux 6.6+): the /proc/self/fd/N a perf-event uprobe was created with, or the path of the
// file a uprobe_multi link resolved it to, for checking, while the Executable is open, that
// they name the inode that was parsed.
func (a *Attachment) Files() ([]string, error) {
	var out []string
	for _, l := range a.links {
		info, err := l.Info()
		if err != nil {
			return nil, err
		}
		// A uprobe_multi link reports the path of the file the kernel resolved (d_path); a
		// perf-event uprobe the path it was given.
		if um := info.UprobeMulti(); um != nil && um.File != "" {
			out = append(out, um.File)
			continue
		}
		pe := info.PerfEvent()
		if pe == nil || pe.Uprobe() == nil {
			return nil, fmt.Errorf("link %v: no uprobe info", info.Type)
		}
		out = append(out, pe.Uprobe().File)
	}
	return out, nil
}

// Find locates the stop- and start-the-world functions in the ELF executable at path:
// from the symbol table, else (stripped with -ldflags=-s) from .gopclntab, which the Go
// runtime itself needs and so is always there. Attaching needs Open instead: it keeps the
// file that was parsed.
func Find(path string) (Targets, error) {
	ex, err := Open(path)
	if err != nil {
		return Targets{}, err
	}
	defer ex.Close()
	return ex.Targets, nil
}

// Open is open without a cache.
func Open(path string) (*Executable, error) { return open(path, nil) }

// Multi tells whether the tracer attaches uprobe_multi links.
func (t *Tracer) Multi() bool { return t.multi }

var ReleaseAtLeast = releaseAtLeast
