//go:build linux

// Package readerr is what the exporter knows of an input it could not read: the reason it
// counts it under (Reason), and the inputs a source skipped, kept as data (Log) until the
// exporter's read-error counter takes them, so that the sources count their errors where
// they happen without calling up into the collectors.
package readerr

import (
	"errors"
	"sort"
	"sync"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/goruntime"
	"github.com/quota-exporter/quota_exporter/exporter/internal/jvm"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// Reason classifies an error for quota_exporter_read_errors_total: vanished, permission,
// parse, timeout, io, panic or perf_data_mismatch.
func Reason(err error) string {
	var ue *jvm.UnavailableError
	switch {
	case errors.Is(err, procread.ErrPanic):
		return "panic"
	case errors.Is(err, procread.ErrTimeout):
		return "timeout"
	case errors.As(err, &ue) && ue.Mismatch():
		return "perf_data_mismatch"
	case errors.Is(err, goruntime.ErrParse):
		return "parse"
	}
	return cgroupfs.ErrorReason(err)
}

// Batch is the inputs of one reason a source skipped since the last Take: how many, and
// the first of them (what the log line names).
type Batch struct {
	Reason  string
	Count   int
	Subject string
	Err     error
}

// Log keeps the inputs a source skipped until Take: one Batch per reason, so it holds at
// most a few errors however many inputs fail. The zero value is ready; safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	pending map[string]*Batch
}

// Add records one skipped input and returns its reason.
func (l *Log) Add(subject string, err error) string {
	r := Reason(err)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		l.pending = map[string]*Batch{}
	}
	b := l.pending[r]
	if b == nil {
		b = &Batch{Reason: r, Subject: subject, Err: err}
		l.pending[r] = b
	}
	b.Count++
	return r
}

// Take returns what was added since the last Take, by reason, and forgets it.
func (l *Log) Take() []Batch {
	l.mu.Lock()
	pending := l.pending
	l.pending = nil
	l.mu.Unlock()
	out := make([]Batch, 0, len(pending))
	for _, b := range pending {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Reason < out[j].Reason })
	return out
}
