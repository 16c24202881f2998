//go:build linux

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The probe endpoints (the Kubernetes manifests point their probes here).
const (
	// healthyPath: liveness. 503 when no scrape can be served: every slot held for longer
	// than a scrape can take.
	healthyPath = "/-/healthy"
	// readyPath: readiness. 200 once the collectors are built and the server listens.
	readyPath = "/-/ready"
)

// Server timeouts: a client gets readHeaderTimeout to send its request line and headers and
// readTimeout for the whole request (a scrape has no body); an idle keep-alive connection
// is closed after idleTimeout. A response must be written within the scrape timeout plus
// --web.write-timeout of the request (http.Server.WriteTimeout), and within
// --web.write-timeout of being built (scrapeHandler).
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 2 * time.Minute
)

func newServer(h http.Handler, scrapeTimeout, writeTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      scrapeTimeout + writeTimeout,
		IdleTimeout:       idleTimeout,
	}
}

// scrapeSlots bounds the scrapes being collected and encoded at once (--web.max-requests)
// and remembers when each slot was taken, for the liveness probe.
type scrapeSlots struct {
	max int // 0: unbounded
	// stuckAfter is how long a slot may be held before it counts as stuck: the scrape timeout
	// (after which Set.Gather returns whatever is unfinished) plus time to encode.
	stuckAfter time.Duration
	mu         sync.Mutex
	held       map[*slot]struct{}
}

type slot struct{ since time.Time }

func newScrapeSlots(max int, scrapeTimeout time.Duration) *scrapeSlots {
	return &scrapeSlots{max: max, stuckAfter: scrapeTimeout + 5*time.Second, held: map[*slot]struct{}{}}
}

// take returns a slot, or nil when all are held.
func (s *scrapeSlots) take() *slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && len(s.held) >= s.max {
		return nil
	}
	sl := &slot{since: time.Now()}
	s.held[sl] = struct{}{}
	return sl
}

func (s *scrapeSlots) release(sl *slot) {
	s.mu.Lock()
	delete(s.held, sl)
	s.mu.Unlock()
}

// stuck tells whether no scrape can be served: every slot held for longer than stuckAfter.
func (s *scrapeSlots) stuck() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max == 0 || len(s.held) < s.max {
		return false
	}
	for sl := range s.held {
		if time.Since(sl.since) < s.stuckAfter {
			return false
		}
	}
	return true
}

// healthy serves the liveness probe.
func (s *scrapeSlots) healthy() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.stuck() {
			http.Error(w, fmt.Sprintf("all %d scrape slots held for more than %v", s.max, s.stuckAfter), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "Healthy.")
	})
}

func ready() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "Ready.") })
}

// maxBuilding bounds the distinct responses built at once (one per Accept and
// Accept-Encoding of the requests in flight: Prometheus sends one kind): each holds a
// collection's encoded body while it is built.
const maxBuilding = 2

// maxHeld bounds the distinct finished responses that clients still reading hold: beyond
// it the connections of the oldest readers are cut (their write deadline set to now). A
// Prometheus reads a response in milliseconds, so only clients that stall are ever cut; two
// leave room for a Prometheus pair scraping at once.
const maxHeld = 2

// scrapeHandler serves /metrics: one response, built by promhttp into memory from the
// gatherer (the exporter's own registry plus one collection of the set, which ends with the
// scrape timeout or when every request waiting for it has gone), is shared by the requests
// that arrive while it is built and ask for the same format and compression: its builder
// holds a slot, the others wait for its bytes. The bytes are then written to each client
// with no slot held, within writeTimeout. A client that never reads holds a shared body, not
// a slot; at most maxHeld distinct bodies are held by such clients (the oldest are cut) and
// at most maxBuilding are being built, so the memory of responses is bounded whatever the
// clients do. base ends the builds at shutdown.
func scrapeHandler(base context.Context, gatherer func(context.Context) prometheus.Gatherer, exporterReg *prometheus.Registry, slots *scrapeSlots, writeTimeout time.Duration, logger *slog.Logger) http.Handler {
	opts := promhttp.HandlerOpts{
		ErrorLog:      slogAdapter{logger},
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      exporterReg,
	}
	s := &sharedResponses{base: base, slots: slots, building: make(chan struct{}, maxBuilding),
		flights: map[string]*responseFlight{}, held: &heldBodies{max: maxHeld},
		build: func(ctx context.Context, r *http.Request) *bufferedResponse {
			ctx = withAnnouncedTimeout(ctx, r.Header)
			return buildResponse(promhttp.HandlerFor(gatherer(ctx), opts), r)
		}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp := s.get(r)
		if resp == nil {
			return // the client went away, or the server is stopping
		}
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		release := s.held.hold(resp, func() { _ = rc.SetWriteDeadline(time.Now()) })
		defer release()
		for k, v := range resp.header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.status)
		_, _ = resp.body.WriteTo(w) // a client gone, too slow or cut: nothing more to do
	})
}

// scrapeTimeoutHeader is how long Prometheus waits for this scrape (it sends it with every
// request): a collection that runs to the exporter's own --scrape.timeout of the same length
// is answered after Prometheus gave up, and the whole scrape is lost instead of the slow part.
const scrapeTimeoutHeader = "X-Prometheus-Scrape-Timeout-Seconds"

type announcedTimeoutKey struct{}

// withAnnouncedTimeout records in ctx the scrape timeout the request's header announces.
func withAnnouncedTimeout(ctx context.Context, h http.Header) context.Context {
	v, err := strconv.ParseFloat(h.Get(scrapeTimeoutHeader), 64)
	if err != nil || v <= 0 || v > 3600 {
		return ctx
	}
	return context.WithValue(ctx, announcedTimeoutKey{}, time.Duration(v*float64(time.Second)))
}

// scrapeTimeout is the time bound of the scrape whose context is ctx: timeout, or the
// timeout its scraper announced less offset (time to encode and send) when that is shorter.
func scrapeTimeout(ctx context.Context, timeout, offset time.Duration) time.Duration {
	if a, ok := ctx.Value(announcedTimeoutKey{}).(time.Duration); ok && a-offset < timeout {
		return max(a-offset, a/2)
	}
	return timeout
}

// sharedResponses builds one response per flight for the requests with the same Accept and
// Accept-Encoding (so the same bytes suit them all).
type sharedResponses struct {
	base     context.Context
	slots    *scrapeSlots
	building chan struct{} // tokens: responses being built (maxBuilding)
	build    func(ctx context.Context, r *http.Request) *bufferedResponse
	held     *heldBodies

	mu      sync.Mutex
	flights map[string]*responseFlight
}

// responseFlight is one response being built for the requests that wait for it.
type responseFlight struct {
	key     string
	done    chan struct{}
	resp    *bufferedResponse
	waiters int
	cancel  context.CancelFunc
}

// get returns the response for r, joining the flight of its format if one is being built;
// nil when r's client went away first.
func (s *sharedResponses) get(r *http.Request) *bufferedResponse {
	key := r.Header.Get("Accept") + "\x00" + r.Header.Get("Accept-Encoding") + "\x00" + r.Header.Get(scrapeTimeoutHeader)
	s.mu.Lock()
	f := s.flights[key]
	if f == nil {
		sl := s.slots.take()
		if sl == nil {
			s.mu.Unlock()
			return errorResponse(http.StatusServiceUnavailable, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", s.slots.max))
		}
		ctx, cancel := context.WithCancel(s.base)
		f = &responseFlight{key: key, done: make(chan struct{}), cancel: cancel}
		s.flights[key] = f
		// The builder sees a copy of the request without its context (the flight outlives
		// the request that started it) and with the headers that decide the bytes.
		req := r.Clone(ctx)
		go func() {
			defer close(f.done)
			defer cancel()
			defer s.slots.release(sl)
			defer func() {
				s.mu.Lock()
				if s.flights[key] == f {
					delete(s.flights, key)
				}
				s.mu.Unlock()
			}()
			select {
			case s.building <- struct{}{}:
				defer func() { <-s.building }()
				f.resp = s.build(ctx, req)
			case <-ctx.Done():
				f.resp = errorResponse(http.StatusServiceUnavailable, fmt.Sprintf("Limit of responses built at once reached (%d), try again later.", maxBuilding))
			}
		}()
	}
	f.waiters++
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.resp
	case <-r.Context().Done():
		s.mu.Lock()
		if f.waiters--; f.waiters == 0 {
			f.cancel() // nobody waits: stop collecting
			if s.flights[f.key] == f {
				delete(s.flights, f.key)
			}
		}
		s.mu.Unlock()
		return nil
	}
}

func errorResponse(status int, msg string) *bufferedResponse {
	resp := &bufferedResponse{header: http.Header{}, status: status}
	resp.header.Set("Content-Type", "text/plain; charset=utf-8")
	resp.header.Set("X-Content-Type-Options", "nosniff")
	_, _ = resp.body.Write([]byte(msg + "\n"))
	return resp
}

// heldBodies bounds the distinct response bodies that clients still reading hold: a body is
// shared by the clients of one flight, and when more than max distinct ones are held, the
// connections of the clients that began reading first are cut (write deadline now), so their
// bodies can be freed.
type heldBodies struct {
	max int
	mu  sync.Mutex
	// writers are in the order they began writing. A writer leaves with slices.Delete,
	// which clears the vacated slot: a body must not stay reachable from the array behind
	// the slice after its last reader has gone (it was, until the next scrape: the last
	// response, 1.7 MB at 1 000 cgroups, live between scrapes, and twice that in the heap
	// the GC lets grow).
	writers []*heldWriter
}

type heldWriter struct {
	body *bufferedResponse
	cut  func()
}

// hold registers a client about to write body; cut ends its write at once. release, called
// once its write has returned, unregisters it (cut is never called after release).
func (h *heldBodies) hold(body *bufferedResponse, cut func()) (release func()) {
	w := &heldWriter{body: body, cut: cut}
	h.mu.Lock()
	h.writers = append(h.writers, w)
	for h.distinct() > h.max {
		for i, o := range h.writers {
			if o.body != body {
				o.cut()
				h.writers = slices.Delete(h.writers, i, i+1)
				break
			}
		}
	}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for i, o := range h.writers {
			if o == w {
				h.writers = slices.Delete(h.writers, i, i+1)
				return
			}
		}
	}
}

// distinct counts the distinct bodies held. h.mu held.
func (h *heldBodies) distinct() int {
	seen := make(map[*bufferedResponse]bool, len(h.writers))
	for _, w := range h.writers {
		seen[w.body] = true
	}
	return len(seen)
}

// bufferedResponse keeps what promhttp writes (headers, status, encoded and perhaps
// compressed body) until the slot is released; it is shared, read-only, by the clients of
// its flight.
type bufferedResponse struct {
	header http.Header
	status int
	body   responseBody
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) WriteHeader(status int)      { b.status = status }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }

// buildResponse runs h (promhttp) for r into memory.
func buildResponse(h http.Handler, r *http.Request) *bufferedResponse {
	resp := &bufferedResponse{header: http.Header{}, status: http.StatusOK}
	h.ServeHTTP(resp, r)
	return resp
}
