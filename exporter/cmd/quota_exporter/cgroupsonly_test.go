package main

import (
	"bytes"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The cgroups-only mode (issue 30): the exporter without hostPID, here in a PID namespace of
// its own (unshare --pid --fork --mount-proc), against real v1 cgroups laid out as the
// kubelet lays them out, their processes in the host's namespace, which cgroup.procs hides
// from the exporter. It still exports the cgroups that have no limit of their own: a
// BestEffort pod and its container, the container of a pod whose only limit is the pod's
// (pod-level resources), and the pod's sandbox (container="POD": the kubelet never links it,
// and the exporter sees no process in it); it says at start-up, in one log line and in
// quota_exporter_host_pid_namespace, that it is not in the host's PID namespace.
func TestCgroupsOnlyWithoutHostPID(t *testing.T) {
	testutil.RequireV1Cgroups(t)
	_, err := exec.LookPath("unshare")
	testutil.Require(t, err == nil, "unshare(1) not installed (util-linux)")
	const (
		uidBE  = "3c3c3c3c-3333-4333-8333-3c3c3c3c3c3c"
		uidPod = "4d4d4d4d-4444-4444-8444-4d4d4d4d4d4d"
	)
	idBE, idApp, idSandbox := strings.Repeat("e1", 32), strings.Repeat("a2", 32), strings.Repeat("d3", 32)
	parent := testutil.NewCgroup(t, "cgonly", testutil.CgroupOptions{})
	kubepods := parent.Child("kubepods", testutil.CgroupOptions{})
	bePod := kubepods.Child("besteffort", testutil.CgroupOptions{}).Child("pod"+uidBE, testutil.CgroupOptions{})
	be := bePod.Child(idBE, testutil.CgroupOptions{})
	pod := kubepods.Child("burstable", testutil.CgroupOptions{}).Child("pod"+uidPod, testutil.CgroupOptions{QuotaUS: 50000, MemoryLimit: 64 << 20})
	app := pod.Child(idApp, testutil.CgroupOptions{})
	sandbox := pod.Child(idSandbox, testutil.CgroupOptions{})
	sleep, err := exec.LookPath("sleep")
	testutil.Require(t, err == nil, "sleep(1) not installed")
	pause := filepath.Join(t.TempDir(), "pause")
	testutil.CopyFile(t, sleep, pause, 0o755)
	for _, w := range []struct {
		cg  *testutil.Cgroup
		bin string
	}{{be, sleep}, {app, sleep}, {sandbox, pause}} {
		cmd := w.cg.Command(w.bin, "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	for deadline := time.Now().Add(10 * time.Second); len(be.PIDs()) == 0 || len(app.PIDs()) == 0 || len(sandbox.PIDs()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the workloads did not join their cgroups")
		}
	}
	// The kubelet's log directories: the two containers, never the sandbox.
	logs := t.TempDir()
	testutil.WriteKubeletLogs(t, logs,
		testutil.KubeletContainer{Namespace: "batch", Pod: "report-0", UID: uidBE, Container: "report", ID: idBE},
		testutil.KubeletContainer{Namespace: "shop", Pod: "web-0", UID: uidPod, Container: "app", ID: idApp})

	bin := buildExporter(t)
	addr := freeAddr(t)
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", bin, "--web.listen-address="+addr,
		"--cgroup.include="+parent.Path+"(/.*)?", "--path.podlogs="+logs)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// unshare --fork blocks SIGINT and SIGTERM in the parent; --kill-child takes the exporter
		// with it when it dies.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("exporter log:\n%s", out)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exporter did not come up:\n%s", out)
		}
	}
	body := get(t, "http://"+addr+"/metrics")
	want := map[string][]string{
		"the BestEffort pod":              {`cgroup="` + bePod.Path + `"`, `pod="report-0"`},
		"the BestEffort container":        {`cgroup="` + be.Path + `"`, `container="report"`},
		"the pod-level limit's container": {`cgroup="` + app.Path + `"`, `container="app"`, `pod="web-0"`},
		"the sandbox":                     {`cgroup="` + sandbox.Path + `"`, `container="POD"`, `pod="web-0"`},
	}
	for what, subs := range want {
		if len(metricLines(body, "quota_memory_usage_bytes", subs...)) != 1 {
			t.Errorf("%s: no quota_memory_usage_bytes with %v", what, subs)
		}
	}
	if !strings.Contains(body, "\nquota_exporter_host_pid_namespace 0\n") {
		t.Error("quota_exporter_host_pid_namespace is not 0")
	}
	if n := strings.Count(out.String(), "not in the host's PID namespace"); n != 1 {
		t.Errorf("%d start-up lines about the PID namespace, want 1", n)
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", strings.Join(metricLines(body, "quota_memory_usage_bytes"), "\n"))
	}
}
