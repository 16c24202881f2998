//go:build linux

package main

// Exported for tests only: the product code does not use these.

// Len is the body's length.
func (b *responseBody) Len() int { return b.n }

// Cap is the memory its chunks hold.
func (b *responseBody) Cap() int {
	n := 0
	for _, c := range b.chunks {
		n += cap(c)
	}
	return n
}
