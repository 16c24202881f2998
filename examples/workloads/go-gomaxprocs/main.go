// Command go-gomaxprocs reproduces seed 004: a Go service whose GOMAXPROCS (16 here, the host's
// CPU count in the field report) is far above its 0.5-core quota. It allocates continuously,
// so the garbage collector runs often with 16 Ps worth of workers, and with -busy a few request
// handlers compute without pause; together they exhaust the quota within a period. Every
// stop-the-world must preempt the busy handlers' Ps, and a thread the quota has descheduled
// stops only when the quota refills: pauses stretch from microseconds to 50-250 ms (p99
// about 100 ms here, as in the field report). Run with GOMAXPROCS=16 in a cgroup with a
// 0.5-core quota.
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"runtime"
	"runtime/metrics"
	"time"
)

func main() {
	workers := flag.Int("workers", 16, "allocating goroutines")
	busy := flag.Int("busy", 0, "goroutines that compute without pause (the e2e and the demo run 4)")
	flag.Parse()
	fmt.Printf("go-gomaxprocs: runtime.GOMAXPROCS(0) = %d, NumCPU = %d, %d allocating and %d busy goroutines\n",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), *workers, *busy)
	for i := 0; i < *workers; i++ {
		go allocate()
	}
	for i := 0; i < *busy; i++ {
		go compute()
	}
	for range time.Tick(10 * time.Second) {
		fmt.Printf("go-gomaxprocs: GOMAXPROCS %d, goroutines %d, GC stop-the-world p99 %s, max %s\n",
			runtime.GOMAXPROCS(0), runtime.NumGoroutine(), pauseQuantile(0.99), pauseQuantile(1))
	}
}

// allocate serves a steady stream of "requests", each allocating 64 KiB in small objects and
// keeping one of them for a while, like a service building and caching responses.
func allocate() {
	keep := make([][]byte, 1024)
	for i := 0; ; i++ {
		var req [][]byte
		for j := 0; j < 64; j++ {
			req = append(req, make([]byte, 512+(i+j)%1024))
		}
		keep[i%len(keep)] = req[i%len(req)]
		time.Sleep(3 * time.Millisecond)
	}
}

// compute hashes without end, like request handlers busy with CPU work: each holds a P, so
// every stop-the-world must preempt it, and its thread may be throttled when asked.
func compute() {
	buf := make([]byte, 1024)
	for {
		sum := sha256.Sum256(buf)
		buf[0] = sum[0]
	}
}

// pauseQuantile reads the runtime's stop-the-world pause histogram (all pauses since start).
func pauseQuantile(q float64) time.Duration {
	s := []metrics.Sample{{Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := s[0].Value.Float64Histogram()
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	target := uint64(q * float64(total))
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= target && c > 0 {
			return time.Duration(h.Buckets[i+1] * float64(time.Second))
		}
	}
	return 0
}
