//go:build linux && (amd64 || arm64)

package gopause

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/execache"
)

// Pause is one stop-the-world pause of one process: from the entry of
// runtime.stopTheWorldWithSema to where the runtime stops its own /sched/pauses/total clock:
// the entry of runtime.startTheWorldWithSema for GC mark termination, its call of wakep
// (the world started again) for the rest.
type Pause struct {
	PID      int // host tgid
	Duration time.Duration
	// Reason is the runtime's stwReason (Go >= 1.21 passes it; see Kind).
	Reason uint8
}

// Tracer owns the loaded BPF programs and the ring buffer of pauses; one per exporter,
// shared by every attached process (each uprobe is filtered to its process).
type Tracer struct {
	objs   probesObjects
	rd     *ringbuf.Reader
	done   chan struct{}
	closed sync.Once
	// probes is the number of uprobes in place, against opts.MaxProbes.
	probes atomic.Int64
	opts   Options
	// found keeps what was found in each executable file, for the next process of it.
	found *execache.Cache[found]
	// multi: uprobe_multi links (multiLinks), one per program and process. Their release
	// waits for an RCU tasks-trace grace period but not under the global mutex that
	// serialises the perf-event uprobes' (about 0.1 s each on 6.18), so links closed side by
	// side share grace periods: an exporter with hundreds of processes attached can exit in
	// seconds, not minutes.
	multi bool
}

// New loads the programs and starts delivering every finished pause to handle, from one
// goroutine, until Close. An error wraps the kernel's (EPERM without CAP_BPF/CAP_PERFMON).
func New(handle func(Pause), opts Options) (*Tracer, error) {
	if opts.MaxProbes <= 0 {
		opts.MaxProbes = DefaultMaxProbes
	}
	if opts.PausesPerSecond <= 0 {
		opts.PausesPerSecond = DefaultPausesPerSecond
	}
	// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK; later ones ignore it.
	_ = rlimit.RemoveMemlock()
	t := &Tracer{done: make(chan struct{}), opts: opts, found: execache.New[found](maxFound)}
	spec, err := loadProbes()
	if err != nil {
		return nil, fmt.Errorf("load BPF programs: %w", err)
	}
	if err := spec.Variables[probesVarBudgetPerSec].Set(uint32(opts.PausesPerSecond)); err != nil {
		return nil, fmt.Errorf("pause budget: %w", err)
	}
	if !opts.PerfEventUprobes && multiLinks() {
		t.multi = true
		for _, p := range spec.Programs {
			p.AttachType = ebpf.AttachTraceUprobeMulti
		}
	}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, fmt.Errorf("load BPF programs: %w", err)
	}
	rd, err := ringbuf.NewReader(t.objs.Events)
	if err != nil {
		t.objs.Close()
		return nil, fmt.Errorf("ring buffer: %w", err)
	}
	t.rd = rd
	go t.read(handle)
	return t, nil
}

// multiLinks: the kernel has uprobe_multi links and filters them by process, as Linux 6.10
// does; from 6.6 to 6.9 the filter matched the given thread only (fixed by "bpf: fix
// multi-uprobe PID filtering logic"), and a Go runtime stops the world from any of its threads.
func multiLinks() bool {
	if features.HaveBPFLinkUprobeMulti() != nil {
		return false
	}
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return releaseAtLeast(unix.ByteSliceToString(u.Release[:]), 6, 10)
}

// releaseAtLeast tells whether a kernel release ("6.18.44-fc-v669") is major.minor or later.
func releaseAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if n, _ := fmt.Sscanf(release, "%d.%d", &ma, &mi); n != 2 {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

func (t *Tracer) read(handle func(Pause)) {
	defer close(t.done)
	var rec ringbuf.Record
	for {
		if err := t.rd.ReadInto(&rec); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			continue
		}
		if len(rec.RawSample) < 16 {
			continue
		}
		b := rec.RawSample
		handle(Pause{
			PID:      int(binary.LittleEndian.Uint32(b[0:4])),
			Reason:   uint8(binary.LittleEndian.Uint32(b[4:8])),
			Duration: time.Duration(binary.LittleEndian.Uint64(b[8:16])),
		})
	}
}

// Lost is the number of pauses dropped because the ring buffer was full.
func (t *Tracer) Lost() uint64 { return sum(t.objs.Lost) }

// Limited is the number of pauses dropped because their process had spent its budget
// (Options.PausesPerSecond).
func (t *Tracer) Limited() uint64 { return sum(t.objs.Limited) }

// Probes is the number of uprobes in place.
func (t *Tracer) Probes() int { return int(t.probes.Load()) }

func sum(m *ebpf.Map) uint64 {
	var per []uint64
	if err := m.Lookup(uint32(0), &per); err != nil {
		return 0
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

// Close detaches nothing (Attachments are closed by their owners) but unloads the programs
// and stops the reader; pauses of still-attached processes are no longer seen.
func (t *Tracer) Close() error {
	var err error
	t.closed.Do(func() {
		err = t.rd.Close()
		<-t.done
		err = errors.Join(err, t.objs.Close())
	})
	return err
}

// Attachment is the uprobes on one process.
type Attachment struct {
	t     *Tracer
	links []link.Link
	held  int64 // probes taken from t's budget
}

// Attach puts the entry uprobes on the executable ex, which open parsed, firing only for pid.
// The kernel is given /proc/self/fd/N of ex's descriptor: the probes land on the inode that
// was parsed, whatever the process (or anyone) did with the path since. A node already at
// Options.MaxProbes refuses (ReasonNodeProbeLimit).
func (t *Tracer) Attach(pid int, ex *Executable) (*Attachment, error) {
	tg := ex.Targets
	n := int64(1 + len(tg.Restarted))
	if ReasonPassed(tg.GoVersion) {
		n++
	}
	if t.probes.Add(n) > int64(t.opts.MaxProbes) {
		t.probes.Add(-n)
		return nil, &RefusedError{Reason: ReasonNodeProbeLimit, Detail: fmt.Sprintf("%d uprobes in place (cap %d)", t.probes.Load(), t.opts.MaxProbes)}
	}
	a := &Attachment{t: t, held: n}
	bin, err := link.OpenExecutable(ex.fdPath())
	if err != nil {
		a.Close()
		return nil, err
	}
	// Addresses are file offsets: no second symbol lookup, and stripped binaries work the same.
	add := func(sym string, offs []uint64, prog *ebpf.Program) error {
		if len(offs) == 0 {
			return nil
		}
		if t.multi { // one link for every offset of the program
			l, err := bin.UprobeMulti(nil, prog, &link.UprobeMultiOptions{Addresses: offs, PID: uint32(pid)})
			if err != nil {
				a.Close()
				return fmt.Errorf("uprobe_multi %s at %#x: %w", sym, offs, err)
			}
			a.links = append(a.links, l)
			return nil
		}
		for _, off := range offs {
			l, err := bin.Uprobe(sym, prog, &link.UprobeOptions{Address: off, PID: pid})
			if err != nil {
				a.Close()
				if errors.Is(err, ebpf.ErrNotSupported) {
					err = fmt.Errorf("%w: %w", ErrUnsupported, err)
				}
				return fmt.Errorf("uprobe %s at %#x: %w", sym, off, err)
			}
			a.links = append(a.links, l)
		}
		return nil
	}
	if err := add(StopSymbol, []uint64{tg.Stop}, t.objs.StopTheWorld); err != nil {
		return nil, err
	}
	// The entry ends mark termination pauses only; it needs the reason (Go >= 1.21).
	if ReasonPassed(tg.GoVersion) {
		if err := add(StartSymbol, []uint64{tg.Start}, t.objs.StartTheWorld); err != nil {
			return nil, err
		}
	}
	if err := add(StartSymbol, tg.Restarted, t.objs.WorldStarted); err != nil {
		return nil, err
	}
	return a, nil
}

// AttachProcess opens /proc/<pid>/exe under procfs once, refuses what open refuses, attaches
// through that descriptor and then checks that the process still runs that file: one that
// ran another binary meanwhile is detached (ReasonExecuted), as its probes would never fire.
func (t *Tracer) AttachProcess(procfs string, pid int) (*Attachment, Targets, error) {
	exe := fmt.Sprintf("%s/%d/exe", procfs, pid)
	ex, err := open(exe, t.found)
	if err != nil {
		return nil, Targets{}, err
	}
	defer ex.Close()
	a, err := t.Attach(pid, ex)
	if err != nil {
		return nil, ex.Targets, err
	}
	if !ex.Same(exe) {
		a.Close()
		return nil, ex.Targets, &RefusedError{Reason: ReasonExecuted, Detail: "the process runs another executable than the one parsed"}
	}
	return a, ex.Targets, nil
}

// CloseAll closes the attachments: uprobe_multi links side by side, at most 32 at a time, so
// that their releases share RCU grace periods; perf-event uprobes one after the other, as
// the kernel releases them one at a time anyway (no thread is spent waiting on its mutex).
func CloseAll(as []*Attachment) {
	var g errgroup.Group
	g.SetLimit(1)
	if len(as) > 0 && as[0].t.multi {
		g.SetLimit(32)
	}
	for _, a := range as {
		g.Go(a.Close)
	}
	_ = g.Wait() // a link that cannot be closed is released by the kernel at exit
}

// Close removes the uprobes.
func (a *Attachment) Close() error {
	var err error
	for _, l := range a.links {
		err = errors.Join(err, l.Close())
	}
	a.links = nil
	if a.held != 0 {
		a.t.probes.Add(-a.held)
		a.held = 0
	}
	return err
}
