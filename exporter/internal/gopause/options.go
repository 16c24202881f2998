package gopause

// Options bound what the tracer does for all processes together.
type Options struct {
	// MaxProbes caps the uprobes in place node-wide (each attached process has 2 or 3, at
	// most 2+MaxRestarted); 0: DefaultMaxProbes.
	MaxProbes int
	// PausesPerSecond is each process's budget of pauses sent through the shared ring
	// buffer; beyond it a pause is counted (Limited) and dropped in the kernel. 0:
	// DefaultPausesPerSecond.
	PausesPerSecond int
	// PerfEventUprobes attaches perf-event uprobes even where the kernel has uprobe_multi
	// links: the only kind before Linux 6.10 (multiLinks), kept testable on later kernels.
	PerfEventUprobes bool
}

// Defaults: 1 000 processes of today's Go (3 probes each); a Go program stops the world a
// few times a second when busy, a few hundred times in a GC loop, 1 000 in the overhead benchmark.
const (
	DefaultMaxProbes       = 3000
	DefaultPausesPerSecond = 2000
)
