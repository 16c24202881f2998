//go:build linux && !(amd64 || arm64)

package cfsstall

import (
	"errors"
	"time"
)

// The BPF objects are built for x86-64 and arm64 only (bpf/kernel.h declares their kprobe registers).

type Stall struct {
	CgroupID  uint64
	Duration  time.Duration
	End       time.Duration
	RunQueues uint32
}

type Mode string

const (
	Fentry Mode = "fentry"
	Kprobe Mode = "kprobe"
)

var ErrClosed = errors.New("cfsstall: tracer closed")

type Tracer struct{}

func Open() (*Tracer, error) {
	return nil, errors.New("CFS stall tracing is implemented for linux/amd64 and linux/arm64 only")
}

func OpenMode(Mode) (*Tracer, error) { return Open() }

func (t *Tracer) Mode() Mode                               { return "" }
func (t *Tracer) Read() (Stall, error)                     { return Stall{}, ErrClosed }
func (t *Tracer) Lost() (uint64, error)                    { return 0, nil }
func (t *Tracer) RunStats() (uint64, time.Duration, error) { return 0, 0, nil }
func (t *Tracer) Close() error                             { return nil }
