package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cfsstall"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// --collector.cfsstall where the kernel refuses kernel tracing (this host: no kprobes,
// fentry EPERM), as root and as nobody without capabilities: the exporter says why in one
// log line, the scrape succeeds with every collector, and no stall series appear. The stall
// lengths themselves are tested in the cgroup v2 VM (test/v2/cfsstall_test.go).
func TestCfsStallUnavailable(t *testing.T) {
	testutil.RequireRoot(t)
	if tr, err := cfsstall.Open(); err == nil {
		tr.Close()
		t.Skip("kernel tracing works on this host: the collector attaches (tested in the VM)")
	}
	setpriv := testutil.LookPath(t, "setpriv")
	bin := buildExporter(t)
	for _, c := range []struct {
		name    string
		wrapper []string
	}{
		{"root", nil},
		{"nobody", []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "exporter.log")
			// The shell (root) opens the log, then execs the wrapper and the exporter.
			wrapper := append([]string{"sh", "-c", `exec "$@" 2>>` + log, "sh"}, c.wrapper...)
			addr := startExporter(t, wrapper, bin, "--collector.cfsstall", "--no-collector.throttle")
			var body string
			for range 2 {
				body = get(t, "http://"+addr+"/metrics")
			}
			for _, want := range []string{
				`quota_exporter_scrape_collector_success{collector="cfsstall"} 1`,
				"quota_exporter_cfsstall_available 0",
				`quota_exporter_scrape_collector_success{collector="cpu"} 1`,
				`quota_cpu_usage_seconds_total{cgroup="/"`,
			} {
				if !strings.Contains(body, want) {
					t.Errorf("/metrics lacks %q", want)
				}
			}
			if strings.Contains(body, "quota_cpu_throttle_stall_seconds") || strings.Contains(body, "quota_exporter_cfsstall_lost_total") {
				t.Error("stall series exported although the program is not attached")
			}
			b, _ := os.ReadFile(log)
			if n := strings.Count(string(b), "cfsstall: cannot attach"); n != 1 {
				t.Errorf("%d log lines about the collector, want 1:\n%s", n, b)
			}
			if !strings.Contains(string(b), "reason=") {
				t.Errorf("log gives no reason:\n%s", b)
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "cfsstall") {
					t.Log(line)
				}
			}
		})
	}
}
