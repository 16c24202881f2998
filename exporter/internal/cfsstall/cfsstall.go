//go:build linux && (amd64 || arm64)

// Package cfsstall measures how long each CFS bandwidth stall of a cgroup lasts, with a BPF
// program on the kernel's throttle and unthrottle paths (bpf/cfsstall.c). A stall starts
// when the first of a cgroup's per-CPU run queues is throttled and ends when the last one
// is unthrottled: a freeze of the whole cgroup counts once, as the application lives it.
// It is a pure library: it reports (cgroup id, length) pairs and leaves mapping ids to
// cgroups, and exporting, to the caller.
package cfsstall

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Stall is one finished stall of a cgroup.
type Stall struct {
	// CgroupID is the kernel's id of the cgroup whose quota ran out: the inode number of
	// its directory in the hierarchy that holds the cpu controller (the v2 tree, or v1's
	// cpu hierarchy).
	CgroupID uint64
	Duration time.Duration
	// End is when it ended, on CLOCK_MONOTONIC (time since boot, without suspend), to
	// line stalls up with other readings.
	End time.Duration
	// RunQueues is the most per-CPU run queues of the cgroup throttled at once during the
	// stall (cpu.stat's throttled time counts each of them).
	RunQueues uint32
}

// Mode is how the programs are attached.
type Mode string

const (
	Fentry Mode = "fentry" // fexit on throttle_cfs_rq, fentry on unthrottle_cfs_rq (BPF trampolines)
	Kprobe Mode = "kprobe" // kprobe + kretprobe on throttle_cfs_rq, kprobe on unthrottle_cfs_rq
)

// ErrClosed is returned by Read after Close.
var ErrClosed = errors.New("cfsstall: tracer closed")

// Tracer holds the loaded programs, their links and the ring buffer reader.
type Tracer struct {
	mode   Mode
	maps   bpfObjsMaps
	progs  []*ebpf.Program
	links  []link.Link
	reader *ringbuf.Reader
}

// Open loads and attaches the programs: fentry/fexit first, kprobes where the kernel
// refuses trampolines. Its error says why each way failed (no BTF, no kprobes, EPERM
// without CAP_BPF and CAP_PERFMON, functions missing).
func Open() (*Tracer, error) {
	t, errFentry := OpenMode(Fentry)
	if errFentry == nil {
		return t, nil
	}
	t, errKprobe := OpenMode(Kprobe)
	if errKprobe == nil {
		return t, nil
	}
	err := fmt.Errorf("fentry: %w; kprobe: %w", errFentry, errKprobe)
	if errors.Is(err, unix.EPERM) {
		// cilium/ebpf suggests MEMLOCK for every EPERM; memlock is lifted above already.
		err = fmt.Errorf("%w (EPERM: the exporter lacks CAP_BPF and CAP_PERFMON, or the kernel refuses this program type)", err)
	}
	return nil, err
}

// attachment is one program and where it goes.
type attachment struct {
	prog *ebpf.Program
	fn   string
	how  func(fn string, p *ebpf.Program) (link.Link, error)
}

func tracing(_ string, p *ebpf.Program) (link.Link, error) {
	return link.AttachTracing(link.TracingOptions{Program: p}) // the function is in the program's section name
}
func kprobe(fn string, p *ebpf.Program) (link.Link, error)    { return link.Kprobe(fn, p, nil) }
func kretprobe(fn string, p *ebpf.Program) (link.Link, error) { return link.Kretprobe(fn, p, nil) }

// OpenMode loads the maps and only the programs of one mode (LoadAndAssign loads what the
// struct names), then attaches them. Open picks the mode; tests force one.
func OpenMode(mode Mode) (_ *Tracer, err error) {
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; newer ones ignore it.
	_ = rlimit.RemoveMemlock()
	spec, err := loadBpfObjs()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded BPF object: %w", err)
	}
	t := &Tracer{mode: mode}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	var attach []attachment
	switch mode {
	default:
		return nil, fmt.Errorf("unknown mode %q", mode)
	case Fentry:
		var o struct {
			bpfObjsMaps
			Throttle   *ebpf.Program `ebpf:"fexit_throttle_cfs_rq"`
			Unthrottle *ebpf.Program `ebpf:"fentry_unthrottle_cfs_rq"`
		}
		err = spec.LoadAndAssign(&o, nil)
		t.maps, t.progs = o.bpfObjsMaps, []*ebpf.Program{o.Throttle, o.Unthrottle}
		// Unthrottle first: a stall must not start before its end can be seen.
		attach = []attachment{{o.Unthrottle, "unthrottle_cfs_rq", tracing}, {o.Throttle, "throttle_cfs_rq", tracing}}
	case Kprobe:
		var o struct {
			bpfObjsMaps
			Entry      *ebpf.Program `ebpf:"kprobe_throttle_cfs_rq"`
			Return     *ebpf.Program `ebpf:"kretprobe_throttle_cfs_rq"`
			Unthrottle *ebpf.Program `ebpf:"kprobe_unthrottle_cfs_rq"`
		}
		err = spec.LoadAndAssign(&o, nil)
		t.maps, t.progs = o.bpfObjsMaps, []*ebpf.Program{o.Entry, o.Return, o.Unthrottle}
		attach = []attachment{{o.Unthrottle, "unthrottle_cfs_rq", kprobe},
			{o.Return, "throttle_cfs_rq", kretprobe}, {o.Entry, "throttle_cfs_rq", kprobe}}
	}
	if err != nil {
		return nil, fmt.Errorf("loading: %w", err)
	}
	for _, a := range attach {
		l, err := a.how(a.fn, a.prog)
		if err != nil {
			return nil, fmt.Errorf("attaching to %s: %w", a.fn, err)
		}
		t.links = append(t.links, l)
	}
	if t.reader, err = ringbuf.NewReader(t.maps.Stalls); err != nil {
		return nil, fmt.Errorf("ring buffer: %w", err)
	}
	return t, nil
}

// Mode says how the programs were attached.
func (t *Tracer) Mode() Mode { return t.mode }

// recordSize is struct stall in bpf/cfsstall.c: cgroup id, length and end (u64), run
// queues (u32) and padding.
const recordSize = 32

// Read blocks until a stall has ended and returns it; ErrClosed after Close. A record of
// the wrong size (a mismatch between the program and this reader) is an error, not a panic.
func (t *Tracer) Read() (Stall, error) {
	rec, err := t.reader.Read()
	if errors.Is(err, ringbuf.ErrClosed) {
		return Stall{}, ErrClosed
	}
	if err != nil {
		return Stall{}, err
	}
	return ParseRecord(rec.RawSample)
}

// ParseRecord decodes one ring buffer record (little-endian struct stall).
func ParseRecord(b []byte) (Stall, error) {
	if len(b) < recordSize {
		return Stall{}, fmt.Errorf("cfsstall: record of %d bytes, want %d", len(b), recordSize)
	}
	ns, end := binary.LittleEndian.Uint64(b[8:16]), binary.LittleEndian.Uint64(b[16:24])
	if ns > end || end > uint64(1<<63-1) {
		return Stall{}, fmt.Errorf("cfsstall: stall of %d ns ending at %d ns", ns, end)
	}
	return Stall{CgroupID: binary.LittleEndian.Uint64(b[0:8]), Duration: time.Duration(ns), End: time.Duration(end),
		RunQueues: binary.LittleEndian.Uint32(b[24:28])}, nil
}

// Lost is how many stalls the program could not report (ring buffer or maps full).
func (t *Tracer) Lost() (uint64, error) {
	var per []uint64
	if err := t.maps.Lost.Lookup(uint32(0), &per); err != nil {
		return 0, err
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

// RunStats sums the programs' executions and run time as the kernel counts them: only while
// statistics are enabled (ebpf.EnableStats, or sysctl kernel.bpf_stats_enabled=1), which
// costs time itself, so only measurements do it.
func (t *Tracer) RunStats() (runs uint64, runtime time.Duration, err error) {
	for _, p := range t.progs {
		st, err := p.Stats()
		if err != nil {
			return 0, 0, err
		}
		runs += st.RunCount
		runtime += st.Runtime
	}
	return runs, runtime, nil
}

// Close detaches the programs first (no stall starts or ends after), then frees the rest;
// a Read blocked in another goroutine returns ErrClosed.
func (t *Tracer) Close() error {
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	if t.reader != nil {
		errs = append(errs, t.reader.Close())
	}
	for _, p := range t.progs {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	t.progs = nil
	errs = append(errs, t.maps.Close())
	return errors.Join(errs...)
}
