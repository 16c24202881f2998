//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
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
	mux.Handle("/metrics", scrapeHandler(context.Background(), func(context.Context) prometheus.Gatherer { return stuck }, reg, slots, time.Second, promslog.NewNopLogger()))
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
	for _, enc := range []string{"gzip", "identity"} { // two responses: requests alike share one
		go func() {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
			req.Header.Set("Accept-Encoding", enc)
			resp, err := http.DefaultClient.Do(req)
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
	// A request that can join neither stuck response needs a slot of its own: there is none.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Accept-Encoding", "deflate")
	if resp, err := (&http.Client{Timeout: time.Second}).Do(req); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("slots stuck: /metrics %v %v, want 503", resp, err)
	} else {
		resp.Body.Close()
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

// fixtureNode writes a v2 node of n pods (a pod cgroup and two containers each, with quotas
// and limits) under a new directory and returns the exporter flags that read it.
func fixtureNode(t *testing.T, n int) []string {
	t.Helper()
	root := worldReadableTempDir(t)
	var cgs []fixture.Cgroup
	for i := range n {
		pod := fmt.Sprintf("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%08x_1111_2222_3333_%012x.slice", i, i)
		cgs = append(cgs, fixture.Cgroup{Path: pod, QuotaUS: 200000, MemoryLimit: 1 << 30})
		for c := range 2 {
			cgs = append(cgs, fixture.Cgroup{Path: fmt.Sprintf("%s/cri-containerd-%064x.scope", pod, i*2+c), QuotaUS: 100000, MemoryLimit: 512 << 20,
				Periods: 1000, Throttled: 100, ThrottledUS: 5e6, UserUS: 1e8, SystemUS: 1e7, MemUsage: 300 << 20, Anon: 200 << 20, File: 100 << 20})
		}
	}
	if err := fixture.Write(root, fixture.V2, cgs); err != nil {
		t.Fatal(err)
	}
	return []string{"--path.procfs=" + filepath.Join(root, "proc"), "--path.sysfs=" + filepath.Join(root, "sys"), "--path.podlogs=",
		"--no-collector.process", "--no-collector.go", "--no-collector.jvm", "--no-collector.malloc", "--no-collector.smaps", "--no-collector.oom"}
}

// procStatusKiB reads a "Name:   123 kB" field of /proc/<pid>/status.
func procStatusKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			var n int
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &n)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// slowClients is how many clients of TestSlowClientsMemoryBounded connect, ask for a
// scrape each and never read: each response is larger than the kernel buffers for a
// stalled reader, so every one of them holds the server's write.
const slowClients = 40

// The real exporter on a node of 150 pods (responses of 8 MB: full histograms and memory
// detail): 40 clients that each ask for a scrape and never read do not add a response each to
// the exporter's memory. The responses they wait for are shared and bounded (the oldest
// readers are cut), its peak RSS stays within a few responses of the baseline, and a normal
// scrape meanwhile still succeeds.
func TestSlowClientsMemoryBounded(t *testing.T) {
	bin := buildExporter(t)
	const scrapeTimeout = 10 * time.Second
	addr := freeAddr(t)
	cmd := exec.Command(bin, append(fixtureNode(t, 150), "--web.listen-address="+addr, "--scrape.timeout="+scrapeTimeout.String(),
		"--web.write-timeout=60s", "--throttle.full-histograms", "--memory.detail", "--runtime.gomemlimit-ratio=0")...)
	// GOGC=10: the heap follows what is live (held responses), not the garbage of each
	// collection, so the RSS tells what the clients hold.
	cmd.Env = append(os.Environ(), "GOGC=10")
	runExporter(t, cmd, addr)
	pid := cmd.Process.Pid
	status, body, took := scrapeWithin(t, "http://"+addr+"/metrics", 2*scrapeTimeout)
	if status != http.StatusOK {
		t.Fatalf("a scrape: %d", status)
	}
	for range 2 { // the baseline: a few scrapes' worth of heap, as a scraped exporter has
		_, body, _ = scrapeWithin(t, "http://"+addr+"/metrics", 2*scrapeTimeout)
	}
	size := len(body) // with the sampler's histograms, which the first scrape may lack
	base := procStatusKiB(t, pid, "VmHWM")
	t.Logf("a scrape: %d bytes (the first in %v); peak RSS after three scrapes %d KiB", size, took, base)
	if size < 4<<20 {
		t.Fatalf("the response is %d bytes: too small to stall a writer (the kernel buffers about 2.8 MB)", size)
	}
	// One client at a time, each after the last one's collection: nothing is shared by
	// accident of timing.
	var conns []net.Conn
	for i := range slowClients {
		conns = append(conns, stalledClient(t, addr, 1))
		time.Sleep(200 * time.Millisecond)
		if i%8 == 7 {
			t.Logf("%d slow clients: RSS %d KiB", i+1, procStatusKiB(t, pid, "VmRSS"))
		}
	}
	time.Sleep(2 * time.Second)
	st, body, took := scrapeWithin(t, "http://"+addr+"/metrics", 2*scrapeTimeout)
	peak := procStatusKiB(t, pid, "VmHWM")
	grown := peak - base
	t.Logf("%d slow clients: peak RSS %d KiB (+%d KiB, %.1f responses of %d KiB); a scrape meanwhile: %d in %v",
		slowClients, peak, grown, float64(grown)*1024/float64(size), size/1024, st, took)
	if st != http.StatusOK {
		t.Errorf("a scrape with %d slow clients: %d", slowClients, st)
	}
	// Which slow clients were cut: their connection ends within a few seconds of reading on.
	cut := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.Copy(io.Discard, c); err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			cut++
		}
	}
	t.Logf("%d of the %d slow clients were answered whole or cut before the write timeout; heap: %s", cut, slowClients, strings.Join(metricLinesOf(body, "go_memstats_heap_inuse_bytes", "go_memstats_heap_sys_bytes"), ", "))
	// At most 4 responses are built and 2 held at once; the heap around them (the collections,
	// the encoders, what the GC has not yet returned: it lags furthest on a saturated machine,
	// 13.3 responses measured at load average 65) is at most about as much again. Unbounded
	// buffering grew it by 174 responses for these 40 clients.
	if limit := 16 * size / 1024; grown > limit {
		t.Errorf("peak RSS grew by %d KiB with %d slow clients: more than 16 responses (%d KiB)", grown, slowClients, limit)
	}
}

// metricLinesOf are the sample lines of body for the named metrics.
func metricLinesOf(body string, names ...string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		for _, n := range names {
			if strings.HasPrefix(l, n+" ") {
				out = append(out, l)
			}
		}
	}
	return out
}

// countingGatherer counts its collections and holds each until released.
type countingGatherer struct {
	calls   *atomic.Int32
	release chan struct{}
}

func (g countingGatherer) Gather() ([]*dto.MetricFamily, error) {
	g.calls.Add(1)
	<-g.release
	name, help, v := "shared_total", "a counter", float64(g.calls.Load())
	return []*dto.MetricFamily{{Name: &name, Help: &help, Type: dto.MetricType_COUNTER.Enum(),
		Metric: []*dto.Metric{{Counter: &dto.Counter{Value: &v}}}}}, nil
}

// Requests that arrive while a response is built, asking for the same format and
// compression, get that response's bytes: one collection and one encoding for all of them,
// with one slot. Another compression is a response of its own.
func TestConcurrentScrapesShareOneResponse(t *testing.T) {
	var calls atomic.Int32
	g := countingGatherer{calls: &calls, release: make(chan struct{})}
	slots := newScrapeSlots(2, time.Second)
	srv := httptest.NewServer(scrapeHandler(context.Background(), func(context.Context) prometheus.Gatherer { return g },
		prometheus.NewRegistry(), slots, time.Second, promslog.NewNopLogger()))
	defer srv.Close()
	get := func(enc string) (string, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Accept-Encoding", enc)
		tr := &http.Transport{DisableCompression: true}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return err.Error(), ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.Header.Get("Content-Encoding")
	}
	type answer struct{ body, enc string }
	answers := make(chan answer, 11)
	for range 10 {
		go func() { b, e := get("identity"); answers <- answer{b, e} }()
	}
	go func() { b, e := get("gzip"); answers <- answer{b, e} }()
	waitGathers := time.Now().Add(5 * time.Second)
	for calls.Load() < 2 && time.Now().Before(waitGathers) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the rest of the requests join
	close(g.release)
	bodies := map[string]int{}
	for range 11 {
		a := <-answers
		bodies[a.enc+":"+a.body]++
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d collections for 11 requests of two compressions, want 2", n)
	}
	plain := 0
	for k, n := range bodies {
		if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "identity:") {
			plain += n
			if !strings.Contains(k, "shared_total") {
				t.Errorf("a plain response: %q", k)
			}
		}
	}
	if plain != 10 || len(bodies) != 2 {
		t.Errorf("responses: %v", bodies)
	}
}

// heldBodies cuts the oldest readers of other bodies once more than max distinct bodies are
// held, and never a reader that has released.
func TestHeldBodiesBound(t *testing.T) {
	h := &heldBodies{max: 2}
	bodies := []*bufferedResponse{{}, {}, {}}
	cut := map[int]bool{}
	var releases []func()
	for i, b := range []int{0, 0, 1, 2} {
		releases = append(releases, h.hold(bodies[b], func() { cut[i] = true }))
	}
	// Three distinct bodies: the readers of the oldest other body (0 and 1) are cut.
	if !cut[0] || !cut[1] || cut[2] || cut[3] {
		t.Fatalf("cut %v, want readers 0 and 1", cut)
	}
	releases[1]() // its write returned: a no-op now
	releases[2]() // reader 2 is done: body 1 is no longer held
	h.hold(bodies[0], func() { cut[9] = true })
	if cut[9] || cut[3] {
		t.Fatalf("within the bound after a release: cut %v", cut)
	}
	if n := h.distinct(); n != 2 {
		t.Fatalf("%d distinct bodies held, want 2", n)
	}
}

// manyFamilies is a gatherer of one family of n counters, each with a label of 64 bytes:
// about 90 bytes of text format per counter.
type manyFamilies []*dto.MetricFamily

func newManyFamilies(n int) manyFamilies {
	name, help, label := "many_total", "a counter", "id"
	mf := &dto.MetricFamily{Name: &name, Help: &help, Type: dto.MetricType_COUNTER.Enum()}
	for i := range n {
		v, id := float64(i), fmt.Sprintf("%064d", i)
		mf.Metric = append(mf.Metric, &dto.Metric{Label: []*dto.LabelPair{{Name: &label, Value: &id}},
			Counter: &dto.Counter{Value: &v}})
	}
	return manyFamilies{mf}
}

func (g manyFamilies) Gather() ([]*dto.MetricFamily, error) { return g, nil }

// liveHeap is the heap left after full collections (two: sync.Pool keeps its items through
// one), as the runtime counts it.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Once a scrape has been answered, nothing holds its response: between scrapes the heap is
// what the exporter keeps, not the last body. (A writer's slot, vacated, kept the last body
// reachable until the next scrape: 1.7 MB at 1 000 cgroups, and the GC lets the heap grow
// to twice what is live.)
func TestAnsweredResponseNotHeld(t *testing.T) {
	g := newManyFamilies(60000)
	srv := httptest.NewServer(scrapeHandler(context.Background(), func(context.Context) prometheus.Gatherer { return g },
		prometheus.NewRegistry(), newScrapeSlots(2, time.Second), 10*time.Second, promslog.NewNopLogger()))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	before := liveHeap()
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	size, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a scrape: %d, %v", resp.StatusCode, err)
	}
	after := liveHeap()
	grown := int64(after) - int64(before)
	t.Logf("a response of %d KiB; the live heap before the scrape %d KiB, after it %d KiB", size>>10, before>>10, after>>10)
	if size < 4<<20 {
		t.Fatalf("the response is %d bytes: too small to tell from the heap's noise", size)
	}
	// What stays is the connection's buffers (8 KiB on each side) and the server's own
	// bookkeeping; a response held is its whole size.
	if grown > size/8 {
		t.Errorf("the live heap grew by %d KiB over a scrape answered in full: the response (%d KiB) is still held", grown>>10, size>>10)
	}
}

// A scrape ends at the timeout Prometheus announces less the offset, when that is sooner
// than --scrape.timeout: answered before Prometheus gives up, with what was read in time.
func TestAnnouncedScrapeTimeout(t *testing.T) {
	var got time.Duration
	mux := http.NewServeMux()
	mux.Handle("/metrics", scrapeHandler(context.Background(), func(ctx context.Context) prometheus.Gatherer {
		got = scrapeTimeout(ctx, 10*time.Second, 500*time.Millisecond)
		return prometheus.NewRegistry()
	}, prometheus.NewRegistry(), newScrapeSlots(2, 10*time.Second), time.Second, promslog.NewNopLogger()))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{"", 10 * time.Second},          // no header: --scrape.timeout
		{"10", 9500 * time.Millisecond}, // Prometheus's 10 s: 0.5 s kept to encode and send
		{"30", 10 * time.Second},        // a longer one: --scrape.timeout still bounds it
		{"0.6", 300 * time.Millisecond}, // shorter than twice the offset: half of it
		{"nonsense", 10 * time.Second},  // ignored
		{"-1", 10 * time.Second},        // ignored
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		if c.header != "" {
			req.Header.Set(scrapeTimeoutHeader, c.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got != c.want {
			t.Errorf("header %q: scrape timeout %v, want %v", c.header, got, c.want)
		}
	}
}
