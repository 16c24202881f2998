package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Received is one alert of one Alertmanager webhook notification.
type Received struct {
	Path        string // /alerts (critical, warning) or /info (info), as routed by Alertmanager
	Receiver    string
	Status      string // firing or resolved
	Labels      map[string]string
	Annotations map[string]string
	StartsAt    time.Time
	At          time.Time // when the receiver got it
}

// Webhook records the notifications Alertmanager sends (its webhook JSON, version 4).
type Webhook struct {
	URL string // http://127.0.0.1:port, Alertmanager posts to URL+"/alerts" and URL+"/info"

	srv     *http.Server
	onAlert func(Received)
	mu      sync.Mutex
	got     []Received
}

// StartWebhook listens on a free loopback port.
func StartWebhook(onAlert func(Received)) (*Webhook, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w := &Webhook{URL: "http://" + l.Addr().String(), onAlert: onAlert}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /alerts", w.handle)
	mux.HandleFunc("POST /info", w.handle)
	w.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = w.srv.Serve(l) }()
	return w, nil
}

func (w *Webhook) handle(rw http.ResponseWriter, r *http.Request) {
	var msg struct {
		Receiver string `json:"receiver"`
		Alerts   []struct {
			Status      string            `json:"status"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
			StartsAt    time.Time         `json:"startsAt"`
		} `json:"alerts"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err == nil {
		err = json.Unmarshal(body, &msg)
	}
	if err != nil {
		http.Error(rw, fmt.Sprintf("bad webhook payload: %v", err), http.StatusBadRequest)
		return
	}
	now := time.Now()
	var batch []Received
	for _, a := range msg.Alerts {
		batch = append(batch, Received{Path: r.URL.Path, Receiver: msg.Receiver, Status: a.Status,
			Labels: a.Labels, Annotations: a.Annotations, StartsAt: a.StartsAt, At: now})
	}
	w.mu.Lock()
	w.got = append(w.got, batch...)
	w.mu.Unlock()
	if w.onAlert != nil {
		for _, a := range batch {
			w.onAlert(a)
		}
	}
	rw.WriteHeader(http.StatusOK)
}

// Alerts returns everything received so far.
func (w *Webhook) Alerts() []Received {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Received(nil), w.got...)
}

// Close stops the receiver.
func (w *Webhook) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = w.srv.Shutdown(ctx)
}
