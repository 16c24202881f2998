//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"
)

// stalledClient connects with a 4 KiB receive buffer (set before connect, so the window it
// offers stays small), sends n pipelined scrape requests and never reads a response. The
// kernel buffers about 2.8 MB for such a reader on loopback here: n responses must be more
// than that for the server's write to block.
func stalledClient(t *testing.T, addr string, n int) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, strings.Repeat("GET /metrics HTTP/1.1\r\nHost: "+addr+"\r\nAccept-Encoding: identity\r\n\r\n", n)); err != nil {
		t.Fatal(err)
	}
	return c
}

// scrapeWithin scrapes url with a client timeout of limit and returns the status, the
// body and the time taken.
func scrapeWithin(t *testing.T, url string, limit time.Duration) (int, string, time.Duration) {
	t.Helper()
	c := http.Client{Timeout: limit}
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v after %v", url, err, time.Since(start))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading: %v after %v", url, err, time.Since(start))
	}
	return resp.StatusCode, string(b), time.Since(start)
}

// handled sums promhttp_metric_handler_requests_total over its codes.
func handled(body string) float64 {
	var n float64
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "promhttp_metric_handler_requests_total{") {
			var v float64
			fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v)
			n += v
		}
	}
	return n
}

// TestStalledClientsDoNotHoldSlots: the real exporter, --web.max-requests 40; 40 clients on
// real TCP sockets with 4 KiB receive buffers send scrapes and never read the answers. A
// normal scrape then still succeeds within the scrape timeout, and the liveness probe stays
// green. Each client pipelines enough requests for 4 MiB of responses, more than the kernel
// buffers for it, so a handler of each really blocks in its write (before the fix, holding
// its slot: every scrape got 503).
func TestStalledClientsDoNotHoldSlots(t *testing.T) {
	bin := buildExporter(t)
	const scrapeTimeout = 5 * time.Second
	addr := startExporter(t, nil, bin, "--web.max-requests=40", "--scrape.timeout="+scrapeTimeout.String(),
		"--web.write-timeout=60s", "--throttle.full-histograms", "--memory.detail")
	status, body, took := scrapeWithin(t, "http://"+addr+"/metrics", scrapeTimeout+2*time.Second)
	t.Logf("a scrape: %d, %d bytes in %v", status, len(body), took)
	pipelined := 4<<20/len(body) + 1 // whole responses beyond what the kernel buffers
	var conns []net.Conn
	for range 40 {
		conns = append(conns, stalledClient(t, addr, pipelined))
	}
	t.Logf("40 clients, %d requests each", pipelined)
	// While the 40 still send requests they use the slots like any scraper; once each
	// connection is blocked in a write, the server's request count stops growing. Before the
	// fix every one of them then held a slot, and every scrape got 503 until the write timeout.
	last, settled := -1.0, time.Now().Add(30*time.Second)
	for {
		time.Sleep(time.Second)
		status, body, _ := scrapeWithin(t, "http://"+addr+"/metrics", scrapeTimeout)
		n := handled(body)
		t.Logf("scrape while the stalled clients settle: %d, %v requests handled", status, n)
		if status == http.StatusOK && n == last+1 { // only this scrape since the last
			break
		}
		if time.Now().After(settled) {
			t.Fatalf("no successful scrape 30 s into the stall (last status %d)", status)
		}
		if status == http.StatusOK {
			last = n
		}
	}
	for i := range 3 {
		status, body, took := scrapeWithin(t, "http://"+addr+"/metrics", scrapeTimeout)
		t.Logf("scrape %d with 40 stalled clients: %d, %d bytes in %v", i, status, len(body), took)
		if status != http.StatusOK {
			t.Errorf("scrape with 40 stalled clients: status %d", status)
		}
		if st, _, _ := scrapeWithin(t, "http://"+addr+healthyPath, time.Second); st != http.StatusOK {
			t.Errorf("%s: %d with 40 stalled clients", healthyPath, st)
		}
	}
	if st, _, _ := scrapeWithin(t, "http://"+addr+readyPath, time.Second); st != http.StatusOK {
		t.Errorf("%s: %d", readyPath, st)
	}
	// The stalled clients were answered (blocked in the write), not turned away.
	buf := make([]byte, 12)
	for _, c := range conns[:3] {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "HTTP/1.1 200" {
			t.Errorf("a stalled client's response starts %q (%v), want HTTP/1.1 200", buf, err)
		}
	}
}

// stuckGatherer never returns until released: a stuck scrape no real collection produces
// (Set.Gather returns at the scrape timeout), to drive the liveness probe red.
type stuckGatherer struct{ release chan struct{} }

func (g stuckGatherer) Gather() ([]*dto.MetricFamily, error) {
	<-g.release
	return nil, nil
}

// TestLivenessWhenSlotsStuck: with both slots held past the scrape timeout the liveness
// probe answers 503 (and scrapes 503); once they are released it is green and scrapes
// succeed again.
func TestLivenessWhenSlotsStuck(t *testing.T) {
	stuck := stuckGatherer{release: make(chan struct{})}
	slots := newScrapeSlots(2, 100*time.Millisecond)
	slots.stuckAfter = 300 * time.Millisecond // scrape timeout plus encoding, shortened for the test
	reg := prometheus.NewRegistry()
	mux := http.NewServeMux()
	mux.Handle("/metrics", scrapeHandler(func(context.Context) prometheus.Gatherer { return stuck }, reg, slots, time.Second, promslog.NewNopLogger()))
	mux.Handle(healthyPath, slots.healthy())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	health := func() int {
		st, _, _ := scrapeWithin(t, srv.URL+healthyPath, time.Second)
		return st
	}
	if st := health(); st != http.StatusOK {
		t.Fatalf("idle: %s %d", healthyPath, st)
	}
	done := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := http.Get(srv.URL + "/metrics")
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if st := health(); st != http.StatusOK {
		t.Errorf("slots held for less than the scrape timeout: %s %d, want 200", healthyPath, st)
	}
	time.Sleep(400 * time.Millisecond)
	if st := health(); st != http.StatusServiceUnavailable {
		t.Errorf("slots stuck: %s %d, want 503", healthyPath, st)
	}
	if st, _, _ := scrapeWithin(t, srv.URL+"/metrics", time.Second); st != http.StatusServiceUnavailable {
		t.Errorf("slots stuck: /metrics %d, want 503", st)
	}
	close(stuck.release)
	for range 2 {
		if st := <-done; st != http.StatusOK {
			t.Errorf("released scrape: %d", st)
		}
	}
	if st := health(); st != http.StatusOK {
		t.Errorf("after release: %s %d, want 200", healthyPath, st)
	}
	if st, _, _ := scrapeWithin(t, srv.URL+"/metrics", time.Second); st != http.StatusOK {
		t.Errorf("after release: /metrics %d", st)
	}
}
