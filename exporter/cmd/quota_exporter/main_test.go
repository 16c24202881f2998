package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// buildExporter builds the command (once per test binary) into a directory anyone may read
// (the permission test runs it as nobody).
func buildExporter(t *testing.T) string {
	t.Helper()
	return testutil.BuildGo(t, ".", "-ldflags=-X github.com/prometheus/common/version.Version=9.9.9-test")
}

func worldReadableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "quota-exporter-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startExporter runs the binary (optionally through a wrapper such as setpriv) and waits for /metrics.
func startExporter(t *testing.T, wrapper []string, bin string, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	argv := append(append(append([]string{}, wrapper...), bin, "--web.listen-address="+addr), args...)
	runExporter(t, exec.Command(argv[0], argv[1:]...), addr)
	return addr
}

// runExporter starts cmd (an exporter listening on addr), stops it when the test ends and
// waits until it answers /metrics.
func runExporter(t *testing.T, cmd *exec.Cmd, addr string) {
	t.Helper()
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("exporter log:\n%s", logs)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("exporter did not come up: %v\n%s", err, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}

// With no flags but the address, on this host: landing page, build info with the injected
// version, cgroup series, every collector successful.
func TestExporterOnThisHost(t *testing.T) {
	bin := buildExporter(t)
	addr := startExporter(t, nil, bin)
	if page := get(t, "http://"+addr+"/"); !strings.Contains(page, "quota_exporter") || !strings.Contains(page, "/metrics") {
		t.Errorf("landing page lacks name or link:\n%s", page)
	}
	body := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{
		`quota_exporter_build_info{`, `version="9.9.9-test"`,
		`quota_cpu_usage_seconds_total{cgroup="/"`,
		`quota_exporter_scrape_collector_success{collector="cpu"} 1`,
		`quota_exporter_scrape_collector_success{collector="malloc"} 1`,
		`quota_exporter_scrape_collector_success{collector="go"} 1`,
		`quota_exporter_scrape_collector_success{collector="memory"} 1`,
		`go_goroutines `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	off := startExporter(t, nil, bin, "--web.disable-exporter-metrics", "--no-collector.memory")
	body = get(t, "http://"+off+"/metrics")
	// The memory collector's own series (the binding collector's quota_memory_binding_limit_bytes
	// stays wherever a memory limit is set on this host).
	if strings.Contains(body, "go_goroutines") || strings.Contains(body, "quota_memory_usage_bytes") {
		t.Error("--web.disable-exporter-metrics / --no-collector.memory ignored")
	}
}

// An exporter without the privilege to read one cgroup's file exports everything else, marks
// the collector failed and counts a permission error.
func TestPermissionDenied(t *testing.T) {
	testutil.RequireRoot(t)
	setpriv := testutil.LookPath(t, "setpriv")
	bin := buildExporter(t)
	root := worldReadableTempDir(t)
	if err := fixture.Write(root, fixture.V2, []fixture.Cgroup{
		{Path: "/open.scope", PIDs: []int{10}, UserUS: 1e6},
		{Path: "/secret.scope", PIDs: []int{11}, QuotaUS: 50000, UserUS: 2e6},
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "sys/fs/cgroup/secret.scope/cpu.stat"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startExporter(t, []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"}, bin,
		"--path.procfs="+filepath.Join(root, "proc"), "--path.sysfs="+filepath.Join(root, "sys"), "--no-collector.throttle")
	body := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{
		`quota_cpu_usage_seconds_total{cgroup="/open.scope"`,
		`quota_exporter_scrape_collector_success{collector="cpu"} 0`,
		`quota_exporter_read_errors_total{collector="cpu",reason="permission"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `quota_cpu_usage_seconds_total{cgroup="/secret.scope"`) {
		t.Error("series of the unreadable cgroup exported")
	}
	fmt.Fprint(io.Discard, body)
}

// Without CAP_SYS_PTRACE the runtime collectors cannot read other users' exe, environ or mem:
// each denial is counted and the cgroup series and every collector keep working.
func TestRuntimeCollectorsUnprivileged(t *testing.T) {
	testutil.RequireRoot(t)
	setpriv := testutil.LookPath(t, "setpriv")
	bin := buildExporter(t)
	// A root-owned Go process the unprivileged exporter may list but not inspect.
	target := exec.Command(bin, "--web.listen-address="+freeAddr(t), "--no-collector.process", "--no-collector.go",
		"--no-collector.jvm", "--no-collector.malloc", "--no-collector.smaps")
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = target.Process.Kill(); _ = target.Wait() })
	addr := startExporter(t, []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"}, bin,
		"--process.min-resident=1MiB", "--no-collector.throttle")
	time.Sleep(500 * time.Millisecond)
	body := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{
		`quota_exporter_read_errors_total{collector="process",reason="permission"}`,
		`quota_exporter_scrape_collector_success{collector="process"} 1`,
		`quota_exporter_scrape_collector_success{collector="cpu"} 1`,
		`quota_exporter_scrape_collector_success{collector="malloc"} 1`,
		`quota_exporter_scrape_collector_success{collector="go"} 1`,
		`quota_cpu_usage_seconds_total{cgroup="/"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// --web.config.file: basic auth through exporter-toolkit protects the metrics.
func TestWebConfigBasicAuth(t *testing.T) {
	bin := buildExporter(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth_users:\n  prometheus: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startExporter(t, nil, bin, "--web.config.file="+cfg, "--no-collector.throttle")
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without credentials: %s, want 401", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	req.SetBasicAuth("prometheus", "s3cret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "quota_exporter_build_info") {
		t.Errorf("with credentials: %s", resp.Status)
	}
}
