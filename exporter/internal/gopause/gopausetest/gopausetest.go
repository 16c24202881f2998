// Package gopausetest builds and drives stwprog, a real Go program that stops the world on
// request and reports its own runtime/metrics pause histograms, for the gopause tests.
package gopausetest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// OlderToolchain is the older Go the tests also build with (GOTOOLCHAIN, from the module
// proxy or the module cache).
const OlderToolchain = "go1.24.9"

// Build compiles stwprog with toolchain ("" = the Go running the test), stripped of its
// symbol table and DWARF (-ldflags=-s -w) or not, and returns the binary's path, built once
// per test binary (testutil.GoProgram).
func Build(t testing.TB, toolchain string, stripped bool) string {
	t.Helper()
	return BuildFor(t, toolchain, "", stripped)
}

// BuildFor is Build for GOARCH goarch ("" = this machine's), to inspect, not to run.
func BuildFor(t testing.TB, toolchain, goarch string, stripped bool) string {
	t.Helper()
	p := testutil.GoProgram{Dir: Source(), Toolchain: toolchain}
	if stripped {
		p.Flags = []string{"-ldflags=-s -w"}
	}
	if goarch != "" {
		p.Env = []string{"GOOS=linux", "GOARCH=" + goarch}
	}
	return p.Build(t)
}

// Prog is a running stwprog.
type Prog struct {
	PID  int
	addr string
}

// Start runs cmd (stwprog, perhaps wrapped to join a cgroup) and waits until it serves.
// The test's cleanup kills it.
func Start(t testing.TB, cmd *exec.Cmd) *Prog {
	t.Helper()
	cmd.Stderr = os.Stderr
	out := testutil.StartPiped(t, cmd)
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, out) // drain: the program must not block on its output
	}()
	select {
	case s := <-line:
		addr, ok := strings.CutPrefix(strings.TrimSpace(s), "ADDR ")
		if !ok {
			t.Fatalf("stwprog said %q", s)
		}
		return &Prog{PID: cmd.Process.Pid, addr: addr}
	case <-time.After(30 * time.Second):
		t.Fatal("stwprog did not start in 30s")
	}
	return nil
}

func (p *Prog) get(t testing.TB, path string) []byte {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Minute}
	resp, err := c.Get("http://" + p.addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	return b
}

// GC makes the program call runtime.GC() n times (two GC pauses each).
func (p *Prog) GC(t testing.TB, n int) { p.get(t, fmt.Sprintf("/gc?n=%d", n)) }

// Loop makes the program call runtime.GC() in a loop for d; it returns the calls made.
func (p *Prog) Loop(t testing.TB, d time.Duration) int {
	var n int
	if _, err := fmt.Sscan(string(p.get(t, "/loop?d="+d.String())), &n); err != nil {
		t.Fatalf("program answered no count: %v", err)
	}
	return n
}

// Work makes the program hash for d while stopping the world hz times a second; it returns
// the hashes done.
func (p *Prog) Work(t testing.TB, d time.Duration, hz int) int {
	var n int
	if _, err := fmt.Sscan(string(p.get(t, fmt.Sprintf("/work?d=%s&hz=%d", d, hz))), &n); err != nil {
		t.Fatalf("program answered no count: %v", err)
	}
	return n
}

// STW makes the program stop the world n times back to back (runtime.ReadMemStats); it
// returns the time per pause.
func (p *Prog) STW(t testing.TB, n int) time.Duration {
	var ns int64
	if _, err := fmt.Sscan(string(p.get(t, fmt.Sprintf("/stw?n=%d", n))), &ns); err != nil {
		t.Fatalf("program answered no pause time: %v", err)
	}
	return time.Duration(ns)
}

// Hist is a runtime/metrics histogram: Counts[i] pauses in [Buckets[i], Buckets[i+1]).
type Hist struct {
	Counts  []uint64  `json:"counts"`
	Buckets []float64 `json:"buckets"`
}

// Pauses returns the program's own /sched/pauses/total/{gc,other}:seconds by kind.
func (p *Prog) Pauses(t testing.TB) map[string]Hist {
	var h map[string]Hist
	if err := json.Unmarshal(p.get(t, "/pauses"), &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// Count is the number of pauses.
func (h Hist) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Sub is h minus an earlier reading of the same histogram.
func (h Hist) Sub(earlier Hist) Hist {
	out := Hist{Counts: append([]uint64(nil), h.Counts...), Buckets: h.Buckets}
	for i := range min(len(out.Counts), len(earlier.Counts)) {
		out.Counts[i] -= earlier.Counts[i]
	}
	return out
}

// Quantile is the q-quantile as the bucket holding it: [lo, hi) in seconds.
func (h Hist) Quantile(q float64) (lo, hi float64) {
	rank := uint64(math.Ceil(q * float64(h.Count())))
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= rank && c > 0 {
			return h.Buckets[i], h.Buckets[i+1]
		}
	}
	return math.NaN(), math.NaN()
}

// Quantile is the q-quantile of exact durations (nearest rank).
func Quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// Source is the directory of stwprog's source.
func Source() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "stwprog")
}
