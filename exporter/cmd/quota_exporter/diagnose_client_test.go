//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// diagnoseExit runs diagnose and returns its exit status, stderr and how long it took.
func diagnoseExit(t *testing.T, bin string, args ...string) (int, string, time.Duration) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"diagnose", "--log.level=error", "--format=json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), stderr.String(), time.Since(start)
	case err != nil:
		t.Fatalf("diagnose: %v\n%s", err, stderr.String())
	}
	return 0, stderr.String(), time.Since(start)
}

// TestDiagnosePrometheusClient: diagnose --prometheus.url against the pinned Prometheus
// behind basic auth (its --web.config.file) succeeds only with
// --prometheus.http-config-file; against an endpoint that answers without end it stops at
// --prometheus.max-response-size, and against one that never answers at --prometheus.timeout
// (exit 3 both times, with the reason).
func TestDiagnosePrometheusClient(t *testing.T) {
	bin := buildExporter(t)
	out, err := exec.Command("go", "tool", "-modfile="+filepath.Join("..", "..", "..", "tools", "go.mod"), "-n", "prometheus").Output()
	testutil.Require(t, err == nil, fmt.Sprintf("pinned prometheus (make tools): %v", err))
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	webCfg := write("web.yml", "basic_auth_users:\n  diag: "+string(hash)+"\n")
	promCfg := write("prometheus.yml", "global:\n  scrape_interval: 1m\n")
	clientCfg := write("client.yml", "basic_auth:\n  username: diag\n  password: s3cret\n")
	addr := freeAddr(t)
	prom := exec.Command(strings.TrimSpace(string(out)), "--config.file="+promCfg, "--web.config.file="+webCfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	var logs bytes.Buffer
	prom.Stdout, prom.Stderr = &logs, &logs
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Process.Kill(); _ = prom.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/-/ready", nil)
		req.SetBasicAuth("diag", "s3cret")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready:\n%s", logs.String())
		}
	}
	url := "--prometheus.url=http://" + addr
	if code, stderr, _ := diagnoseExit(t, bin, url, "--since=5m"); code != diagnoseCannotRun || !strings.Contains(stderr, "401") {
		t.Errorf("without credentials: exit %d, stderr %q; want 3 and a 401", code, stderr)
	}
	if code, stderr, _ := diagnoseExit(t, bin, url, "--since=5m", "--prometheus.http-config-file="+clientCfg); code != 0 {
		t.Errorf("with the client configuration: exit %d, stderr %q; want 0 (no series, no findings)", code, stderr)
	}

	// An endpoint that streams without end, and one that never answers.
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := bytes.Repeat([]byte(" "), 64<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer hostile.Close()
	code, stderr, took := diagnoseExit(t, bin, "--prometheus.url="+hostile.URL, "--prometheus.max-response-size=1MiB")
	t.Logf("endless response: exit %d in %v: %s", code, took, strings.TrimSpace(stderr))
	if code != diagnoseCannotRun || !strings.Contains(stderr, "larger than") {
		t.Errorf("endless response: exit %d, stderr %q; want 3 and the size bound", code, stderr)
	}
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}))
	defer stall.Close()
	code, stderr, took = diagnoseExit(t, bin, "--prometheus.url="+stall.URL, "--prometheus.timeout=2s")
	t.Logf("no answer: exit %d in %v: %s", code, took, strings.TrimSpace(stderr))
	if code != diagnoseCannotRun || took > 10*time.Second {
		t.Errorf("no answer: exit %d after %v, stderr %q; want 3 within the 2 s timeout", code, took, stderr)
	}
}
