package history

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/api"
	"github.com/prometheus/common/config"
)

// DefaultMaxResponseBytes bounds one query's response: the answers diagnose asks for are one
// sample per series of one node (a few MB on a node with hundreds of containers).
const DefaultMaxResponseBytes = 64 << 20

// ErrResponseTooLarge: a Prometheus (or whatever answers at its URL) sent more than
// Options.MaxResponseBytes for one query.
var ErrResponseTooLarge = errors.New("response larger than the bound (--prometheus.max-response-size)")

// newClient is the Prometheus API client: prometheus/common's HTTP client configuration (TLS,
// basic auth, bearer token, OAuth2, proxy: the same file format as Prometheus's own
// scrape and remote-write clients), every response bounded in size.
func newClient(o Options) (api.Client, error) {
	cfg := config.DefaultHTTPClientConfig
	if o.HTTPConfigFile != "" {
		c, _, err := config.LoadHTTPConfigFile(o.HTTPConfigFile)
		if err != nil {
			return nil, fmt.Errorf("HTTP client configuration: %w", err)
		}
		cfg = *c
	}
	rt, err := config.NewRoundTripperFromConfig(cfg, "quota_exporter_diagnose")
	if err != nil {
		return nil, fmt.Errorf("HTTP client configuration: %w", err)
	}
	max := o.MaxResponseBytes
	if max <= 0 {
		max = DefaultMaxResponseBytes
	}
	return api.NewClient(api.Config{Address: o.URL, RoundTripper: boundedBodies{rt, max}})
}

// boundedBodies fails a response whose body exceeds max bytes, declared or read.
type boundedBodies struct {
	rt  http.RoundTripper
	max int64
}

func (b boundedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > b.max {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %d bytes: %w", req.URL.Path, resp.ContentLength, ErrResponseTooLarge)
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: b.max}
	return resp, nil
}

type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, ErrResponseTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if err == nil && b.left <= 0 {
		// One more byte would be too many: find out now, not on the caller's next read.
		var one [1]byte
		if m, _ := b.ReadCloser.Read(one[:]); m > 0 {
			return n, ErrResponseTooLarge
		}
	}
	return n, err
}
