// Package procread reads files of other processes under /proc with a size cap and a time
// bound. A read of /proc/<pid>/maps or environ takes the target's mmap lock; a target stuck in
// the kernel can make it block, and a scrape must never hang on one process.
package procread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// DefaultTimeout bounds one per-process read when the caller's context has no deadline.
const DefaultTimeout = 2 * time.Second

// ErrTimeout is returned when a read did not finish in time; the reading goroutine is
// abandoned (it ends when the kernel returns).
var ErrTimeout = errors.New("read timed out")

// ReadFile reads at most maxBytes of path within the context's deadline (DefaultTimeout if none).
func ReadFile(ctx context.Context, path string, maxBytes int64) ([]byte, error) {
	return Do(ctx, func() ([]byte, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, maxBytes))
	})
}

// ReadAt reads len(buf) bytes at off from path (used for /proc/<pid>/mem) within the deadline.
func ReadAt(ctx context.Context, f *os.File, buf []byte, off int64) (int, error) {
	type result struct {
		n   int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		n, err := f.ReadAt(buf, off)
		ch <- result{n, err}
	}()
	ctx, cancel := withDefault(ctx)
	defer cancel()
	select {
	case r := <-ch:
		return r.n, r.err
	case <-ctx.Done():
		return 0, fmt.Errorf("%s at %#x: %w", f.Name(), off, ErrTimeout)
	}
}

// Do runs read in a goroutine and gives up when the context ends.
func Do[T any](ctx context.Context, read func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := read()
		ch <- result{v, err}
	}()
	ctx, cancel := withDefault(ctx)
	defer cancel()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ErrTimeout
	}
}

func withDefault(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}
