package examples

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDaemonSetMountsSuffice runs the real exporter the way the DaemonSet does, with nothing of
// the host but the DaemonSet's own mounts: chrooted into an empty read-only root holding only the
// binary, its own procfs and sysfs (as a container gets), and each hostPath volume bind-mounted
// read-only at its mountPath, with the DaemonSet's own arguments. A cgroup laid out like a
// kubelet's (…/kubepods/burstable/pod<uid>/<container id>) with a CPU quota holds a Go process,
// and a kubelet-style log directory names it. The scrape must show the quotas (cgroup trees),
// the Go process (the host's /proc) and the pod's and container's names (the kubelet's
// /var/log/pods and /var/log/containers): the
// least-privilege mount set is enough, without the host's / or the rest of /sys.
func TestDaemonSetMountsSuffice(t *testing.T) {
	require(t, os.Geteuid() == 0, "needs root (mount namespace, chroot, cgroups)")
	_, err := exec.LookPath("unshare")
	require(t, err == nil, "unshare (util-linux) not installed")
	_, m := loadManifests(t)
	if len(m.DaemonSets) != 1 {
		t.Fatalf("want one DaemonSet, got %d", len(m.DaemonSets))
	}
	pod := m.DaemonSets[0].Spec.Template.Spec
	c := pod.Containers[0]
	tmp := t.TempDir()

	// The binary, static as in the image.
	bin := filepath.Join(tmp, "quota_exporter")
	build := exec.Command("go", "build", "-o", bin, "./exporter/cmd/quota_exporter")
	build.Dir, build.Env = repoRoot(t), append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// A pod's container cgroup with a 0.5-core quota and a Go process in it.
	uid := fmt.Sprintf("7e1a2b3c-4d5e-4f60-8a9b-%012d", os.Getpid())
	id := fmt.Sprintf("%064x", os.Getpid())
	rel := filepath.Join(fmt.Sprintf("tenantdeploy-mounts-%d", os.Getpid()), "kubepods", "burstable", "pod"+uid, id)
	workload := exec.Command(bin, "--web.listen-address=127.0.0.1:0", "--path.podlogs=")
	if err := workload.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = workload.Process.Kill(); _ = workload.Wait() })
	cleanup := makeQuotaCgroup(t, rel, workload.Process.Pid)
	t.Cleanup(func() { _ = workload.Process.Kill(); _ = workload.Wait(); cleanup() })

	// The kubelet's log directories for that pod (this host runs no kubelet).
	logs := filepath.Join(tmp, "varlog")
	podDir := filepath.Join(logs, "pods", "tenantdeploy_web-0_"+uid, "app")
	if err := os.MkdirAll(podDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(podDir, "0.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(logs, "containers"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(podDir, "0.log"), filepath.Join(logs, "containers", "web-0_tenantdeploy_app-"+id+".log")); err != nil {
		t.Fatal(err)
	}

	// The container's root: read-only, the binary, its own /proc and /sys, the hostPath mounts.
	root := filepath.Join(tmp, "root")
	script := []string{"set -e", "R=" + root}
	for _, d := range []string{"bin", "proc", "sys"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script = append(script, `mount --bind "$R" "$R"`, fmt.Sprintf(`mount --bind %q "$R/bin/quota_exporter"`, bin),
		`mount -o remount,bind,ro "$R"`, `mount -t proc proc "$R/proc"`, `mount -t sysfs -o ro sysfs "$R/sys"`)
	if err := os.WriteFile(filepath.Join(root, "bin", "quota_exporter"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	for _, vm := range c.VolumeMounts {
		src, ok := hostPaths[vm.Name]
		if !ok {
			continue
		}
		if after, ok := strings.CutPrefix(src, "/var/log/"); ok {
			src = filepath.Join(logs, after)
		}
		if err := os.MkdirAll(filepath.Join(root, vm.MountPath), 0o755); err != nil {
			t.Fatal(err)
		}
		script = append(script, fmt.Sprintf(`mount --rbind %q "$R%s"`, src, vm.MountPath),
			fmt.Sprintf(`mount -o remount,bind,ro "$R%s"`, vm.MountPath))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	args := []string{}
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--web.listen-address=") {
			a = "--web.listen-address=" + addr
		}
		args = append(args, strconv.Quote(a))
	}
	script = append(script, `exec chroot "$R" /bin/quota_exporter `+strings.Join(args, " "))
	// unshare execs (no fork): the command's pid is the exporter's, and its mounts go with it.
	exporter := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", strings.Join(script, "\n"))
	var out strings.Builder
	exporter.Stdout, exporter.Stderr = &out, &out
	if err := exporter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exporter.Process.Kill(); _ = exporter.Wait() })

	want := map[string]func(string) bool{
		"the quota (the cgroup trees)": func(l string) bool {
			return strings.HasPrefix(l, "quota_cpu_limit_cores{") && strings.Contains(l, id) && strings.HasSuffix(l, " 0.5")
		},
		"the container's names (the kubelet's /var/log/containers)": func(l string) bool {
			return strings.HasPrefix(l, "quota_cpu_limit_cores{") && strings.Contains(l, id) && strings.Contains(l, `namespace="tenantdeploy"`) &&
				strings.Contains(l, `pod="web-0"`) && strings.Contains(l, `container="app"`)
		},
		"the pod's names (the kubelet's /var/log/pods)": func(l string) bool {
			return strings.HasPrefix(l, "quota_cpu_limit_cores{") && strings.Contains(l, `pod`+uid+`"`) &&
				strings.Contains(l, `namespace="tenantdeploy"`) && strings.Contains(l, `pod="web-0"`) && strings.HasSuffix(l, " 1")
		},
		"the Go process (the host's /proc)": func(l string) bool {
			return strings.HasPrefix(l, "quota_go_info{") && strings.Contains(l, id)
		},
	}
	var body string
	missing := map[string]bool{}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		body = scrape(addr)
		missing = map[string]bool{}
		for what, ok := range want {
			missing[what] = true
			for _, l := range strings.Split(body, "\n") {
				if ok(l) {
					delete(missing, what)
					break
				}
			}
		}
		if len(missing) == 0 {
			break
		}
	}
	for what := range missing {
		t.Errorf("the exporter with only the DaemonSet's mounts does not show %s", what)
	}
	if t.Failed() {
		var ours []string
		for _, l := range strings.Split(body, "\n") {
			if strings.Contains(l, id) || strings.HasPrefix(l, "quota_exporter_read_errors_total") || strings.HasPrefix(l, "quota_exporter_scrape_collector_success") {
				ours = append(ours, l)
			}
		}
		t.Logf("scrape (%d bytes), its lines for the test's cgroup and the self-metrics:\n%s\nexporter output:\n%s", len(body), strings.Join(ours, "\n"), out.String())
	}
}

func scrape(addr string) string {
	client := &http.Client{Timeout: 15 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// makeQuotaCgroup creates rel in the cpu and memory hierarchies (v1) or the unified tree (v2)
// with a 0.5-core quota (1 core on its parent, the pod), moves pid into it, and returns what removes exactly what it created.
func makeQuotaCgroup(t *testing.T, rel string, pid int) func() {
	t.Helper()
	write := func(path, v string) {
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
	}
	var trees []string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		trees = []string{"/sys/fs/cgroup"}
	} else {
		trees = []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/memory"}
	}
	var created []string
	cleanup := func() {
		for i := len(created) - 1; i >= 0; i-- {
			for range 50 {
				if err := os.Remove(created[i]); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	for _, tree := range trees {
		dir := tree
		for _, part := range strings.Split(rel, "/") {
			if len(trees) == 1 { // v2: the controllers must be enabled on the way down
				write(filepath.Join(dir, "cgroup.subtree_control"), "+cpu +memory")
			}
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil {
				cleanup()
				t.Fatal(err)
			}
			created = append(created, dir)
		}
		// 0.5 core on the container, 1 core on its pod.
		switch {
		case len(trees) == 1:
			write(filepath.Join(filepath.Dir(dir), "cpu.max"), "100000 100000")
			write(filepath.Join(dir, "cpu.max"), "50000 100000")
		case strings.HasSuffix(tree, "/cpu"):
			write(filepath.Join(filepath.Dir(dir), "cpu.cfs_quota_us"), "100000")
			write(filepath.Join(dir, "cpu.cfs_quota_us"), "50000")
		}
		write(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
	}
	return cleanup
}
