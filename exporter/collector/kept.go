package collector

import (
	"context"
	"errors"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/processes"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// staleReading is how long a process's last good runtime reading stands in for reads that
// miss their time bound. Each miss would otherwise drop the process's series for a scrape,
// and every gap restarts the `for` of the alerts built on them: a loaded node, where the
// throttling those alerts explain is worst, misses bounds most and would never alert. Two
// minutes bridge a few missed scrapes at any usual interval; a process stuck for longer
// loses its series.
const staleReading = 2 * time.Minute

// missedBound tells a read that did not return within its time bound (timed out, stuck, or
// refused while earlier reads are stuck) from one that returned an answer.
func missedBound(err error) bool {
	return errors.Is(err, procread.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// stamped is a reading and when it was read.
type stamped[T any] struct {
	v  T
	at time.Time
}

// keptSlot keeps each process's last good reading of one kind.
type keptSlot[T any] struct{ slot processes.Slot[stamped[T]] }

func newKeptSlot[T any]() keptSlot[T] {
	return keptSlot[T]{processes.NewSlot[stamped[T]]()}
}

func (k keptSlot[T]) keep(p *processes.Process, v T) {
	k.slot.Store(p, stamped[T]{v, time.Now()})
}

// load is p's last good reading and when it was read (zero time: none).
func (k keptSlot[T]) load(p *processes.Process) (T, time.Time) {
	s := k.slot.Load(p)
	return s.v, s.at
}

// recent is p's last good reading if it is younger than staleReading.
func (k keptSlot[T]) recent(p *processes.Process) (T, bool) {
	v, at := k.load(p)
	if at.IsZero() || time.Since(at) > staleReading {
		var zero T
		return zero, false
	}
	return v, true
}

// orKept is r's value, kept as p's last good reading when r succeeded; when r missed its
// time bound, p's recent kept reading stands in (ok false: nothing to export). The miss is
// still r.Err, for the caller to count.
func orKept[T any](k keptSlot[T], p *processes.Process, r procread.Result[T]) (v T, ok bool) {
	switch {
	case r.Err == nil:
		k.keep(p, r.Value)
		return r.Value, true
	case missedBound(r.Err):
		return k.recent(p)
	}
	return v, false
}
