//go:build linux

package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// seriesHandler serves n series with labels like a container's (about 100 bytes a line).
func seriesHandler(n int) http.Handler {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "quota_memory_usage_bytes", Help: "Memory usage."},
		[]string{"cgroup", "namespace", "pod", "container"})
	reg.MustRegister(g)
	for i := range n {
		id := strconv.Itoa(i)
		g.WithLabelValues("/kubepods/burstable/pod"+id+"/cri-containerd-"+id, "team-"+id, "web-"+id, "app").Set(float64(i))
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// A response built into memory is promhttp's bytes exactly, for any size and compression,
// each client gets them whole, and it holds at most one chunk of spare room: held by a client
// that stalls, it costs its own length and no more.
func TestResponseBodyKeptAtItsLength(t *testing.T) {
	for _, n := range []int{0, 1, 40, 20000} {
		for _, enc := range []string{"", "gzip"} {
			h := seriesHandler(n)
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.Header.Set("Accept-Encoding", enc)
			want := httptest.NewRecorder()
			h.ServeHTTP(want, req)
			resp := buildResponse(h, req)
			for client := range 2 {
				var got bytes.Buffer
				if _, err := resp.body.WriteTo(&got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), want.Body.Bytes()) {
					t.Fatalf("%d series, encoding %q, client %d: %d bytes differ from promhttp's %d", n, enc, client, got.Len(), want.Body.Len())
				}
			}
			if l, c := resp.body.Len(), resp.body.Cap(); l != want.Body.Len() || c-l > maxChunk {
				t.Errorf("%d series, encoding %q: body of %d bytes (promhttp: %d) held in %d", n, enc, l, want.Body.Len(), c)
			}
		}
	}
}

// BenchmarkScrapeResponse is one response of 20 000 series (about 2.9 MB, as 1 000 cgroups'
// 1.9 MB) built into memory: B/op is the encoding's garbage, and the body's buffers are part
// of the scrape's peak.
func BenchmarkScrapeResponse(b *testing.B) {
	h := seriesHandler(20000)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		buildResponse(h, req)
	}
}
