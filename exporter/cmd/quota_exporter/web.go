//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
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

// scrapeHandler serves /metrics: the gatherer for the request (the exporter's own registry
// plus one collection of the set, which ends with the request's context and at the scrape
// timeout) encoded by promhttp into memory while a slot is held, then written to the client
// with the slot released, within writeTimeout. A client that never reads its response holds
// its own buffer for writeTimeout, not a slot: 40 of them cannot turn real scrapes away.
func scrapeHandler(gatherer func(context.Context) prometheus.Gatherer, exporterReg *prometheus.Registry, slots *scrapeSlots, writeTimeout time.Duration, logger *slog.Logger) http.Handler {
	opts := promhttp.HandlerOpts{
		ErrorLog:      slogAdapter{logger},
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      exporterReg,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sl := slots.take()
		if sl == nil {
			http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", slots.max), http.StatusServiceUnavailable)
			return
		}
		resp := &bufferedResponse{header: http.Header{}, status: http.StatusOK}
		promhttp.HandlerFor(gatherer(r.Context()), opts).ServeHTTP(resp, r)
		slots.release(sl)
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))
		for k, v := range resp.header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.status)
		_, _ = w.Write(resp.body.Bytes()) // a client gone or too slow: nothing more to do
	})
}

// bufferedResponse keeps what promhttp writes (headers, status, encoded and perhaps
// compressed body) until the slot is released.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) WriteHeader(status int)      { b.status = status }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
