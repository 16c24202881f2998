// Package procenv reads selected variables from another process's initial environment
// (/proc/<pid>/environ). Environments hold secrets: callers name the few keys they need and
// nothing else is kept, logged or exported.
package procenv

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// maxEnviron caps how much of an environment is read; real ones are a few KiB.
const maxEnviron = 1 << 20

// MaxValue caps a value kept: a longer one is left out, as if the key were not set (the
// values read, GOMAXPROCS, GODEBUG, LD_PRELOAD, MALLOC_* and GLIBC_TUNABLES, are short;
// callers keep them for every process).
const MaxValue = 4 << 10

// Lookup returns the values of keys in the initial environment of pid, read from procPath
// (normally /proc). Keys that are not set are absent from the map. Reading environ needs
// ptrace-read access to the process (CAP_SYS_PTRACE for other users' processes).
func Lookup(ctx context.Context, procPath string, pid int, keys ...string) (map[string]string, error) {
	b, err := procread.ReadFile(ctx, filepath.Join(procPath, strconv.Itoa(pid), "environ"), maxEnviron)
	if err != nil {
		return nil, err
	}
	return Parse(b, keys...), nil
}

// Parse picks keys out of a NUL-separated environ block; a value longer than MaxValue is
// left out. It allocates the values kept and the map, whatever the block holds.
func Parse(environ []byte, keys ...string) map[string]string {
	out := make(map[string]string, len(keys))
	for rest := environ; len(rest) > 0; {
		var kv []byte
		kv, rest, _ = bytes.Cut(rest, []byte{0})
		k, v, ok := bytes.Cut(kv, []byte{'='})
		if !ok {
			continue
		}
		for _, want := range keys {
			if string(k) != want {
				continue
			}
			if len(v) <= MaxValue {
				out[want] = string(v)
			} else {
				delete(out, want) // as the process sees it: the last one counts
			}
		}
	}
	return out
}
