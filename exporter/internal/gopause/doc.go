// Package gopause times Go stop-the-world pauses from outside the process with uprobes placed
// where the runtime starts and stops its own /sched/pauses/total clock: the entry of
// runtime.stopTheWorldWithSema, and in runtime.startTheWorldWithSema its entry (GC mark
// termination, whose clock the runtime stops before the call) or its call of runtime.wakep
// (every other pause, once the world runs again). The functions are found in the symbol
// table or, in stripped binaries, in .gopclntab; the call site by decoding the function.
// Start and end are paired per process in BPF and each pause is delivered through a ring
// buffer. A pure library: no Prometheus types. Needs CAP_BPF and CAP_PERFMON (or root) and a
// kernel with uprobes; the watched process is never stopped, signalled or read.
package gopause
