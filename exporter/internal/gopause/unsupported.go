//go:build !(linux && (amd64 || arm64))

package gopause

import (
	"fmt"
	"time"
)

type Pause struct {
	PID      int
	Duration time.Duration
	Reason   uint8
}

type Tracer struct{}

type Attachment struct{}

// New fails: the BPF program is built for x86-64 and arm64 only (it reads their registers).
func New(func(Pause), Options) (*Tracer, error) {
	return nil, fmt.Errorf("Go pause tracing is implemented for linux/amd64 and linux/arm64 only: %w", ErrUnsupported)
}

func (*Tracer) Lost() uint64                                 { return 0 }
func (*Tracer) Limited() uint64                              { return 0 }
func (*Tracer) Probes() int                                  { return 0 }
func (*Tracer) Close() error                                 { return nil }
func (*Tracer) Attach(int, *Executable) (*Attachment, error) { return nil, ErrUnsupported }
func (*Tracer) AttachProcess(string, int) (*Attachment, Targets, error) {
	return nil, Targets{}, ErrUnsupported
}
func (*Attachment) Close() error { return nil }

func CloseAll([]*Attachment) {}
