package examples

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
	corev1 "k8s.io/api/core/v1"
)

// CheckPodMountsSuffice runs the real exporter the way the pod does, with nothing of the host but
// the pod's own mounts: chrooted into an empty read-only root holding only the binary, its own
// procfs and sysfs (as a container gets), and each hostPath volume bind-mounted read-only at its
// mountPath, with the pod's arguments, user and capabilities (the bounding set is the added ones;
// a non-root user gets none), in its own PID namespace unless the pod has hostPID. A cgroup laid out like a
// kubelet's (…/kubepods/burstable/pod<uid>/<container id>) with a CPU quota holds a Go process,
// and a kubelet-style log directory names it. The scrape must show the quotas (cgroup trees),
// the Go process (the host's /proc) and the pod's and container's names (the kubelet's
// /var/log/pods and /var/log/containers): the
// least-privilege mount set is enough, without the host's / or the rest of /sys.
func CheckPodMountsSuffice(t *testing.T, repoRoot string, pod corev1.PodSpec, want PodWant) {
	t.Helper()
	testenv.Require(t, os.Geteuid() == 0, "needs root (mount namespace, chroot, cgroups)")
	for _, tool := range []string{"unshare", "capsh"} {
		_, err := exec.LookPath(tool)
		testenv.Require(t, err == nil, tool+" not installed (util-linux, libcap2-bin)")
	}
	c := pod.Containers[0]
	tmp := t.TempDir()

	// The binary, static as in the image.
	bin := filepath.Join(tmp, "quota_exporter")
	testenv.BuildGo(t, repoRoot, "./exporter/cmd/quota_exporter", bin)

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
	// capsh: chroot, keep only the pod's added capabilities in the bounding set, become the pod's
	// user, exec the exporter.
	capsh := []string{"exec", "capsh", `--chroot="$R"`, "--drop=" + dropCaps(t, c)}
	if u := runAsUser(pod); u != 0 {
		capsh = append(capsh, fmt.Sprintf("--gid=%d", u), fmt.Sprintf("--uid=%d", u))
	}
	capsh = append(capsh, "--shell=/bin/quota_exporter", "--")
	script = append(script, strings.Join(append(capsh, args...), " "))
	unshare := []string{"--mount", "--propagation", "private"}
	if !pod.HostPID {
		// --fork: the exporter is unshare's child, PID 1 of the new namespace. (Not --kill-child:
		// the parent-death signal does not survive capsh's change of user.)
		unshare = append(unshare, "--pid", "--fork")
	}
	exporter := exec.Command("unshare", append(unshare, "sh", "-c", strings.Join(script, "\n"))...)
	var out strings.Builder
	exporter.Stdout, exporter.Stderr = &out, &out
	exporter.WaitDelay = 5 * time.Second
	if err := exporter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if pid := exporterPID(exporter.Process.Pid, pod.HostPID); pid != exporter.Process.Pid {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = exporter.Process.Kill()
		_ = exporter.Wait()
	})

	wantLines := map[string]func(string) bool{
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
	}
	if !want.NoProcessReaders {
		wantLines["the Go process (the host's /proc)"] = func(l string) bool {
			return strings.HasPrefix(l, "quota_go_info{") && strings.Contains(l, id)
		}
	}
	var body string
	missing := map[string]bool{}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		body = scrape(addr)
		missing = map[string]bool{}
		for what, ok := range wantLines {
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
		t.Errorf("the exporter with only the pod's mounts does not show %s", what)
	}
	checkRunningAs(t, exporter.Process.Pid, pod)
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

// checkRunningAs: the exporter (the unshare command itself, or its child in a new PID
// namespace) runs as the pod's user with exactly the added capabilities (none when not root).
func checkRunningAs(t *testing.T, pid int, pod corev1.PodSpec) {
	t.Helper()
	pid = exporterPID(pid, pod.HostPID)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Errorf("exporter status: %v", err)
		return
	}
	var uid, capEff string
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			uid = strings.Fields(v)[1] // effective
		}
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			capEff = strings.TrimSpace(v)
		}
	}
	if want := strconv.FormatInt(runAsUser(pod), 10); uid != want {
		t.Errorf("exporter runs as uid %s, the pod says %s", uid, want)
	}
	out, err := exec.Command("capsh", "--decode="+capEff).Output()
	if err != nil {
		t.Errorf("capsh --decode=%s: %v", capEff, err)
		return
	}
	_, names, _ := strings.Cut(strings.TrimSpace(string(out)), "=")
	var want []string
	if runAsUser(pod) == 0 && pod.Containers[0].SecurityContext.Capabilities != nil {
		for _, cp := range pod.Containers[0].SecurityContext.Capabilities.Add {
			want = append(want, "cap_"+strings.ToLower(string(cp)))
		}
	}
	got := strings.Split(names, ",")
	if names == "" {
		got = nil
	}
	slices.Sort(got)
	slices.Sort(want)
	t.Logf("exporter pid %d: uid %s, effective capabilities %v", pid, uid, got)
	if !slices.Equal(got, want) {
		t.Errorf("exporter's effective capabilities %v, the pod adds %v", got, want)
	}
}

// exporterPID is the exporter's PID: the unshare command's own with hostPID (unshare execs), else
// its one child (PID 1 of the new namespace).
func exporterPID(unsharePID int, hostPID bool) int {
	if hostPID {
		return unsharePID
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", unsharePID, unsharePID))
	if f := strings.Fields(string(b)); len(f) > 0 {
		if pid, err := strconv.Atoi(f[0]); err == nil {
			return pid
		}
	}
	return unsharePID
}

// runAsUser is the container's user, else the pod's, else root.
func runAsUser(pod corev1.PodSpec) int64 {
	if sc := pod.Containers[0].SecurityContext; sc != nil && sc.RunAsUser != nil {
		return *sc.RunAsUser
	}
	if pod.SecurityContext != nil && pod.SecurityContext.RunAsUser != nil {
		return *pod.SecurityContext.RunAsUser
	}
	return 0
}

// dropCaps lists every capability of this host's bounding set but the container's added ones.
func dropCaps(t *testing.T, c corev1.Container) string {
	t.Helper()
	out, err := exec.Command("capsh", "--print").Output()
	if err != nil {
		t.Fatalf("capsh --print: %v", err)
	}
	keep := map[string]bool{}
	if c.SecurityContext != nil && c.SecurityContext.Capabilities != nil {
		for _, cp := range c.SecurityContext.Capabilities.Add {
			keep["cap_"+strings.ToLower(string(cp))] = true
		}
	}
	var drop []string
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "Bounding set ="); ok {
			for _, cp := range strings.Split(v, ",") {
				if cp = strings.TrimSpace(cp); cp != "" && !keep[cp] {
					drop = append(drop, cp)
				}
			}
		}
	}
	return strings.Join(drop, ",")
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
