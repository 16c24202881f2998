//go:build linux

package main

import (
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

// A finished response keeps at most 1/heldSlack of spare capacity, whether its buffer was
// sized from the last response, grew beyond it, or was sized for a larger one: held by a
// client that stalls, it costs its own length and no more.
func TestResponseBodyKeptAtItsLength(t *testing.T) {
	sizes := &bodySizes{last: map[string]int{}}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	for _, n := range []int{20000, 20000, 20500, 2000, 30000} {
		resp := buildResponse(seriesHandler(n), req, sizes)
		l, c := resp.body.Len(), resp.body.Cap()
		if l < n*80 {
			t.Fatalf("%d series: body of %d bytes", n, l)
		}
		if c-l > l/heldSlack {
			t.Errorf("%d series: body of %d bytes kept in %d (more than 1/%d spare)", n, l, c, heldSlack)
		}
	}
}

// BenchmarkScrapeResponse is one response of 20 000 series (about 2 MB, as at 1 000
// cgroups) built into memory after the first: B/op is the encoding's garbage, and the body's
// buffers are part of the scrape's peak.
func BenchmarkScrapeResponse(b *testing.B) {
	h := seriesHandler(20000)
	sizes := &bodySizes{last: map[string]int{}}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	buildResponse(h, req, sizes)
	b.ReportAllocs()
	for b.Loop() {
		buildResponse(h, req, sizes)
	}
}
