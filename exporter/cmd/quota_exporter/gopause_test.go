package main

import (
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// Without CAP_BPF/CAP_PERFMON the gopause collector cannot load its uprobes: it says why
// once (one log line, one permission error), exports no pauses, and the scrape succeeds.
func TestGoPauseUnprivileged(t *testing.T) {
	testutil.RequireRoot(t)
	setpriv := testutil.LookPath(t, "setpriv")
	bin := buildExporter(t)
	addr := startExporter(t, []string{setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"}, bin,
		"--collector.gopause", "--no-collector.throttle")
	var body string
	for range 2 {
		body = get(t, "http://"+addr+"/metrics")
	}
	for _, want := range []string{
		"quota_exporter_gopause_available 0",
		`quota_exporter_read_errors_total{collector="gopause",reason="permission"} 1`,
		`quota_exporter_scrape_collector_success{collector="gopause"} 1`,
		`quota_exporter_scrape_collector_success{collector="cpu"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "quota_go_stw_pause_seconds") {
		t.Error("pauses exported without uprobes")
	}
}
