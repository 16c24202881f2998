// stwprog stops the world on request and serves its own runtime/metrics pause histograms,
// so a test can compare them with what is measured from outside. It prints "ADDR host:port"
// once listening. GET /gc?n=N runs runtime.GC() N times and returns when done; GET /loop?d=D
// runs runtime.GC() in a loop for D; GET /pauses returns the /sched/pauses/total histograms
// as JSON; /work and /stw measure what the probes cost it. -spin N keeps N goroutines busy
// (they must be preempted for every pause).
package main

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"time"
)

type hist struct {
	Counts  []uint64  `json:"counts"`
	Buckets []float64 `json:"buckets"` // len(Counts)+1 boundaries; ±Inf as ±1e300
}

func main() {
	spin := flag.Int("spin", 0, "busy goroutines")
	flag.Parse()
	for range *spin {
		go func() {
			x := 0
			for {
				x++
			}
		}()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	http.HandleFunc("/gc", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		for range n {
			runtime.GC()
		}
		fmt.Fprintln(w, "ok")
	})
	http.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("d"))
		n := 0
		for end := time.Now().Add(d); time.Now().Before(end); n++ {
			runtime.GC()
		}
		fmt.Fprintln(w, n)
	})
	// /work?d=D&hz=H: hash for D while stopping the world H times a second (ReadMemStats);
	// prints the hashes done (the program's throughput).
	http.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("d"))
		hz, _ := strconv.Atoi(r.URL.Query().Get("hz"))
		stop := make(chan struct{})
		if hz > 0 {
			go func() {
				t := time.NewTicker(time.Second / time.Duration(hz))
				defer t.Stop()
				var ms runtime.MemStats
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						runtime.ReadMemStats(&ms)
					}
				}
			}()
		}
		buf := make([]byte, 1024)
		n := 0
		for end := time.Now().Add(d); time.Now().Before(end); n++ {
			sum := sha256.Sum256(buf)
			buf[0] = sum[0]
		}
		close(stop)
		fmt.Fprintln(w, n)
	})
	// /stw?n=N: N stop-the-world pauses back to back (ReadMemStats); prints ns per pause.
	http.HandleFunc("/stw", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		var ms runtime.MemStats
		start := time.Now()
		for range n {
			runtime.ReadMemStats(&ms)
		}
		fmt.Fprintln(w, time.Since(start).Nanoseconds()/int64(max(n, 1)))
	})
	http.HandleFunc("/pauses", func(w http.ResponseWriter, r *http.Request) {
		s := []metrics.Sample{{Name: "/sched/pauses/total/gc:seconds"}, {Name: "/sched/pauses/total/other:seconds"}}
		metrics.Read(s)
		out := map[string]hist{}
		for i, k := range []string{"gc", "other"} {
			if s[i].Value.Kind() != metrics.KindFloat64Histogram {
				continue
			}
			h := s[i].Value.Float64Histogram()
			b := make([]float64, len(h.Buckets))
			for j, v := range h.Buckets {
				b[j] = max(min(v, 1e300), -1e300) // JSON has no infinities
				if math.IsNaN(v) {
					b[j] = 0
				}
			}
			out[k] = hist{Counts: h.Counts, Buckets: b}
		}
		json.NewEncoder(w).Encode(out)
	})
	fmt.Printf("ADDR %s\n", ln.Addr())
	http.Serve(ln, nil)
}
