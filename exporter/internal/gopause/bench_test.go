//go:build linux && amd64

package gopause_test

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/gopause"
	"github.com/quota-exporter/quota_exporter/exporter/internal/gopause/gopausetest"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// BenchmarkTargetOverhead is the cost to the watched program (docs/performance.md): a program
// that hashes while stopping the world 100 times a second, without and with the probes
// attached, in alternating 2 s windows (hashes/s); and the time of one stop-the-world pause
// (ReadMemStats back to back, the probes' cost per pause shows as the difference).
// Run: go test -run '^$' -bench TargetOverhead -benchtime 5x ./exporter/internal/gopause/
func BenchmarkTargetOverhead(b *testing.B) {
	testutil.RequireRoot(b)
	prog := gopausetest.Start(b, exec.Command(gopausetest.Build(b, "", false)))
	exe := "/proc/" + strconv.Itoa(prog.PID) + "/exe"
	tg, err := gopause.Find(exe)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := gopause.New(func(gopause.Pause) {})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	const window = 2 * time.Second
	var hashes, pause [2]float64 // [detached, attached]
	for range b.N {
		for attached := range 2 {
			var a *gopause.Attachment
			if attached == 1 {
				if a, err = tr.Attach(prog.PID, exe, tg); err != nil {
					b.Fatal(err)
				}
			}
			hashes[attached] += float64(prog.Work(b, window, 100)) / window.Seconds()
			pause[attached] += float64(prog.STW(b, 2000).Nanoseconds())
			if a != nil {
				a.Close()
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(hashes[0]/n, "hashes/s-detached")
	b.ReportMetric(hashes[1]/n, "hashes/s-attached")
	b.ReportMetric(100*(1-hashes[1]/hashes[0]), "%-throughput-lost")
	b.ReportMetric(pause[0]/n/1e3, "µs/pause-detached")
	b.ReportMetric(pause[1]/n/1e3, "µs/pause-attached")
}
