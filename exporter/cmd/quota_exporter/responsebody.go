package main

import "io"

// A response body grows in chunks of firstChunk, doubling up to maxChunk.
const (
	firstChunk = 4 << 10
	maxChunk   = 64 << 10
)

// responseBody holds a response's bytes in chunks: growing never copies what was written,
// and a finished body keeps at most one chunk of spare room. A bytes.Buffer doubles and
// copies as it grows (up to twice the body), and then wants a copy at its exact size to be
// held; those copies were live at once at the top of every scrape's memory (about 2 MB at
// 1 000 cgroups). Written by one builder, then read by any number of clients at once.
type responseBody struct {
	chunks [][]byte
	n      int
}

// Write appends p.
func (b *responseBody) Write(p []byte) (int, error) {
	written := len(p)
	b.n += written
	for len(p) > 0 {
		k := len(b.chunks)
		if k == 0 || len(b.chunks[k-1]) == cap(b.chunks[k-1]) {
			size := firstChunk
			if k > 0 {
				size = min(2*cap(b.chunks[k-1]), maxChunk)
			}
			b.chunks = append(b.chunks, make([]byte, 0, size))
			k++
		}
		last := b.chunks[k-1]
		c := copy(last[len(last):cap(last)], p)
		b.chunks[k-1] = last[:len(last)+c]
		p = p[c:]
	}
	return written, nil
}

// WriteTo writes the body to w, chunk after chunk; it leaves the body as it is, for the
// next client.
func (b *responseBody) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, c := range b.chunks {
		k, err := w.Write(c)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
