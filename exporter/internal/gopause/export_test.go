//go:build linux && amd64

package gopause

import "github.com/cilium/ebpf"

// ProgramsOf exposes a tracer's BPF programs to the tests (run-time statistics).
func ProgramsOf(t *Tracer) map[string]*ebpf.Program {
	return map[string]*ebpf.Program{"stop_the_world": t.objs.StopTheWorld, "start_the_world": t.objs.StartTheWorld, "world_started": t.objs.WorldStarted}
}
