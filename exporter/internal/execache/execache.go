// Package execache remembers what the exporter derived from an executable (its allocator, its
// Go build info, where to probe it) by the file's identity, so the processes of one binary
// share one parse and one small result. Identity is (device, inode, size, mtime, ctime) from
// fstat of the descriptor that was read: a rewritten file changes its ctime (which, unlike
// mtime, a tenant cannot set back), a replaced one its inode. The cache is bounded in
// entries (least recently used goes first); callers keep each value small and capped.
package execache

import (
	"os"

	lru "github.com/hashicorp/golang-lru/v2"
)

// ID identifies one version of one executable file.
type ID struct {
	Dev, Ino     uint64
	Size         int64
	Mtime, Ctime int64 // nanoseconds since the epoch
}

// IDOf is the identity of the file open as f; ok is false where it cannot be told (then
// nothing is cached for it).
func IDOf(f *os.File) (id ID, ok bool) { return idOf(f) }

// Cache maps executables to a derived value. A nil *Cache caches nothing. Safe for
// concurrent use.
type Cache[V any] struct{ lru *lru.Cache[ID, V] }

// New makes a cache of at most entries values.
func New[V any](entries int) *Cache[V] {
	c, err := lru.New[ID, V](entries)
	if err != nil {
		panic(err) // entries <= 0: a programming error
	}
	return &Cache[V]{c}
}

// Get returns the value derived from the executable id, if it is cached.
func (c *Cache[V]) Get(id ID) (V, bool) {
	if c == nil {
		var zero V
		return zero, false
	}
	return c.lru.Get(id)
}

// Add remembers v for the executable id.
func (c *Cache[V]) Add(id ID, v V) {
	if c != nil {
		c.lru.Add(id, v)
	}
}
