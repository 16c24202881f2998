// Package gopause times Go stop-the-world pauses from outside the process: entry uprobes on
// runtime.stopTheWorldWithSema and runtime.startTheWorldWithSema (found in the symbol table
// or, in stripped binaries, in .gopclntab), paired per process in BPF, each pause delivered
// through a ring buffer. A pure library: no Prometheus types. Needs CAP_BPF and CAP_PERFMON
// (or root) and a kernel with uprobes; the watched process is never stopped or signalled.
package gopause
