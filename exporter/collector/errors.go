//go:build linux

package collector

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
	"github.com/quota-exporter/quota_exporter/exporter/internal/readerr"
)

// logEvery limits the log to one line per collector and reason in this interval: a
// malformed file read every scrape must not flood the log.
const logEvery = 5 * time.Minute

// ErrorCounter counts input that had to be skipped (quota_exporter_read_errors_total) and
// logs one line per collector and reason at most every logEvery.
type ErrorCounter struct {
	vec    *prometheus.CounterVec
	logger *slog.Logger
	mu     sync.Mutex
	logged map[string]time.Time
	// sources are the sources' logs of skipped inputs, taken at every collection (sync).
	sources []errorSource
}

// errorSource is one source's skipped inputs and the collector label they are counted under.
type errorSource struct {
	collector string
	take      func() []readerr.Batch
}

// NewErrorCounter creates the counter; register it with the exporter's own registry.
func NewErrorCounter(logger *slog.Logger) *ErrorCounter {
	return &ErrorCounter{
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "exporter", Name: "read_errors_total",
			Help: "quota_exporter: inputs skipped because they could not be read, by collector and reason " +
				"(vanished: the cgroup or process went away, normal churn; permission: access denied, see the " +
				"privileges section of the README; parse: malformed content; timeout: a read exceeded its time " +
				"bound; io: other errors; panic: a parser failed on a process's file, only that process's series " +
				"are dropped; perf_data_mismatch: a JVM perf data file whose VM start time does not match the process's start, or that has none).",
		}, []string{"collector", "reason"}),
		logger: logger,
		logged: map[string]time.Time{},
	}
}

// Describe implements prometheus.Collector.
func (e *ErrorCounter) Describe(ch chan<- *prometheus.Desc) { e.vec.Describe(ch) }

// Collect implements prometheus.Collector; it counts what the sources skipped first.
func (e *ErrorCounter) Collect(ch chan<- prometheus.Metric) {
	e.sync()
	e.vec.Collect(ch)
}

// follow counts the inputs a source skipped (take: its ReadErrors) under collector at
// every sync. Call it before the first collection.
func (e *ErrorCounter) follow(collector string, take func() []readerr.Batch) {
	e.sources = append(e.sources, errorSource{collector, take})
}

// sync counts and logs the inputs the sources skipped since the last sync: at every
// collection of the counter and at the end of every scrape, so a source's errors are in the
// counter as soon as the scrape that met them is.
func (e *ErrorCounter) sync() {
	for _, src := range e.sources {
		for _, b := range src.take() {
			e.count(src.collector, b.Reason, b.Count, b.Subject, b.Err)
		}
	}
}

// Reason classifies an error for the counter (readerr.Reason).
func Reason(err error) string { return readerr.Reason(err) }

// Record counts one skipped input and logs it if this collector has not logged that reason
// recently. It returns the reason.
func (e *ErrorCounter) Record(collector, subject string, err error) string {
	reason := Reason(err)
	if _, ok := err.(cgroups.Counted); ok {
		return reason
	}
	e.count(collector, reason, 1, subject, err)
	return reason
}

// count adds n skipped inputs and logs the one named if this collector has not logged that
// reason recently.
func (e *ErrorCounter) count(collector, reason string, n int, subject string, err error) {
	e.vec.WithLabelValues(collector, reason).Add(float64(n))
	key := collector + "/" + reason
	e.mu.Lock()
	last, seen := e.logged[key]
	now := time.Now()
	doLog := !seen || now.Sub(last) >= logEvery
	if doLog {
		e.logged[key] = now
	}
	e.mu.Unlock()
	if doLog {
		level := slog.LevelWarn
		if reason == "vanished" {
			level = slog.LevelDebug
		}
		e.logger.Log(context.Background(), level, "skipped unreadable input (logged once per collector and reason every 5m)",
			"collector", collector, "reason", reason, "subject", subject, "err", err)
	}
}

// tally gathers one update's skipped inputs into the error that marks the collector failed.
// Vanished cgroups and processes are normal churn and do not fail a collector.
type tally struct {
	collector string
	errors    *ErrorCounter
	tolerated map[string]bool
	mu        sync.Mutex
	byReason  map[string]int
}

func newTally(collector string, errs *ErrorCounter) *tally {
	return &tally{collector: collector, errors: errs, byReason: map[string]int{}, tolerated: map[string]bool{"vanished": true}}
}

// newProcessTally is for per-process collectors: a process the exporter may not read
// (no CAP_SYS_PTRACE) is a deployment state, counted and logged, not a failed collector.
func newProcessTally(collector string, errs *ErrorCounter) *tally {
	t := newTally(collector, errs)
	t.tolerated["permission"] = true
	return t
}

// add records err about subject; it returns false when err is nil.
func (t *tally) add(subject string, err error) bool {
	if err == nil {
		return false
	}
	r := t.errors.Record(t.collector, subject, err)
	t.mu.Lock()
	t.byReason[r]++
	t.mu.Unlock()
	return true
}

// note marks the update failed for an error already counted where it happened (by a
// source), unless its reason is tolerated.
func (t *tally) note(err error) {
	t.mu.Lock()
	t.byReason[Reason(err)]++
	t.mu.Unlock()
}

// errNoHierarchy is a collector's answer on a host without its cgroup hierarchy: not a
// success with no series.
func errNoHierarchy(controller string) error {
	return fmt.Errorf("no %s cgroup hierarchy mounted (see the layout logged at start)", controller)
}

// err summarises the failures ("skipped 2 inputs: parse=1 permission=1"), nil if none.
func (t *tally) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	n := 0
	for r, c := range t.byReason {
		if t.tolerated[r] {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%d", r, c))
		n += c
	}
	if n == 0 {
		return nil
	}
	sort.Strings(parts)
	return fmt.Errorf("skipped %d inputs: %s", n, strings.Join(parts, " "))
}

// Descriptors of metrics built elsewhere (client_golang), listed for docs/metrics.md.
var (
	_ = selfMetric(prometheus.NewDesc(namespace+"_exporter_read_errors_total",
		"quota_exporter: inputs skipped because they could not be read, by collector and reason (vanished, permission, parse, timeout, io, panic: a parser failed on a process's file, only that process's series are dropped; perf_data_mismatch: a JVM's perf data file whose VM start time does not match the process's start, or that has none). Counted where they happen: collector=\"discovery\" for cgroup directories and cgroup.procs files the walk could not read, collector=\"process\" for processes the process listing could not read, whichever collectors are enabled.",
		[]string{"collector", "reason"}, nil))
	_ = selfMetric(prometheus.NewDesc(namespace+"_exporter_build_info",
		"quota_exporter: version, revision, branch and Go version it was built with (prometheus/common version, injected by the Makefile).",
		[]string{"version", "revision", "branch", "goversion", "goos", "goarch", "tags"}, nil))
)
