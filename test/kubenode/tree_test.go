package kubenode

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/test/internal/cgtree"
	"github.com/quota-exporter/quota_exporter/test/kubenode/node"
	"github.com/quota-exporter/quota_exporter/test/testenv"
	"github.com/quota-exporter/quota_exporter/test/v2/vm"
)

// A VM node's real cgroup tree, as the kubelet, systemd, containerd, runc and crun made it,
// becomes a committed fixture host of the collector's unit tests
// (exporter/collector/testdata/hosts/<name>, the kubelet's pod log entries in
// exporter/collector/testdata/podlogs-kubelet/<name>): the pods of the test's namespace, their
// sandboxes and containers, the QoS and kubepods slices and the root. Ids are replaced by
// stable ones derived from the names (a pod's UID from namespace/pod, a container's id from
// namespace/pod/container), so that every run records the same paths. `make
// fixtures-kubenode` rewrites them (QUOTA_KUBENODE_FIXTURE_UPDATE=1); every run checks that
// the committed trees still have the node's set of files and their formats.
const fixtureUpdateEnv = "QUOTA_KUBENODE_FIXTURE_UPDATE"

var (
	podSlice = regexp.MustCompile(`-pod([0-9a-f_]{36}|[0-9a-f]{32})\.slice$`)
	// A container's or sandbox's scope (containerd, CRI-O), CRI-O's conmon scope of a container,
	// and the cgroup without .scope CRI-O makes for a sandbox whose infra container it dropped.
	runtimeScope = regexp.MustCompile(`^(?:cri-containerd|crio|crio-conmon)-([0-9a-f]{64})(?:\.scope)?$`)
)

// fakeID is a stable id of n hex digits for a name.
func fakeID(name string, n int) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(name)))[:n]
}

// fakeUID is a stable pod UID in the form of real's: dashed for API pods, 32 hex digits for static pods.
func fakeUID(name, real string) string {
	h := fakeID("pod:"+name, 32)
	if len(real) == 32 {
		return h
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// recordTree dumps the node's kubepods tree through the node and compares it with the
// committed fixture (or rewrites the fixture).
func recordTree(t *testing.T, ctx context.Context, tg *target, name string) {
	// Ids of the test namespace's pods and containers -> stable ones.
	uids := map[string]string{}       // real UID (as the kubelet writes it in slice names) -> fake
	containers := map[string]string{} // real container id -> fake
	podOf := map[string]string{}      // fake UID -> namespace/pod
	for _, p := range pods(t, ctx, tg) {
		if p.Metadata.Namespace != ns {
			continue
		}
		uid := p.Metadata.UID
		if h := p.Metadata.Annotations["kubernetes.io/config.mirror"]; h != "" {
			uid = h
		}
		pn := p.Metadata.Namespace + "/" + strings.TrimSuffix(p.Metadata.Name, "-"+tg.Node.Name())
		fu := fakeUID(pn, uid)
		uids[uid], podOf[fu] = fu, pn
		for _, cs := range append(append([]containerStatus{}, p.Status.ContainerStatuses...), p.Status.InitContainerStatuses...) {
			if id := node.BareID(cs.ContainerID); id != "" {
				containers[id] = fakeID("ctr:"+pn+"/"+cs.Name, 64)
			}
			if id := node.BareID(lastID(cs)); id != "" {
				containers[id] = fakeID("ctr:"+pn+"/"+cs.Name+"/previous", 64)
			}
		}
	}
	top := strings.TrimPrefix(strings.SplitN(strings.TrimPrefix(tg.layout.Kubepods, "/"), "/", 2)[0], "/")
	out, err := tg.Node.Exec(ctx, "sh", "-c", cgtree.DumpScript, "dump", ".", top)
	must(t, err)
	mountinfo, err := tg.Node.Exec(ctx, "cat", "/proc/self/mountinfo")
	must(t, err)

	files := cgtree.Files{}
	for path, content := range vm.Files(out) {
		fake, keep := fakePath(path, uids, containers)
		if keep {
			files[fake] = content
		}
	}
	got := cgtree.Host(files, mountinfo)
	dir := filepath.Join(testenv.RepoRoot(), "exporter", "collector", "testdata", "hosts", name)
	if os.Getenv(fixtureUpdateEnv) == "1" {
		must(t, cgtree.Write(dir, got))
		logs := filepath.Join(testenv.RepoRoot(), "exporter", "collector", "testdata", "podlogs-kubelet", name)
		n := recordPodLogs(t, ctx, tg, logs, uids, containers)
		t.Logf("wrote %d files to %s and %d pod log entries to %s", len(got), dir, n, logs)
	}
	committed, err := cgtree.Read(dir)
	if err != nil {
		errorf(t, "no committed fixture %s (make fixtures-kubenode): %v", dir, err)
		return
	}
	for _, d := range cgtree.Diff(got, committed) {
		errorf(t, "%s: %s (make fixtures-kubenode)", name, d)
	}
	var cgroups []string
	for k := range files {
		if strings.HasSuffix(k, "/cgroup.controllers") {
			cgroups = append(cgroups, strings.TrimSuffix(k, "/cgroup.controllers"))
		}
	}
	sort.Strings(cgroups)
	t.Logf("%s: the node's tree, %d files of %d cgroups, as committed in %s:\n%s", name, len(got), len(cgroups), dir, strings.Join(cgroups, "\n"))
}

// fakePath replaces the ids in a dumped path by the stable ones; it drops the cgroups of pods
// outside the test's namespace. A container scope in a kept pod whose id is no container of
// the API is the pod's sandbox.
func fakePath(path string, uids, containers map[string]string) (string, bool) {
	segs := strings.Split(path, "/")
	pod := ""
	for i, s := range segs {
		if m := podSlice.FindStringSubmatch(s); m != nil {
			real := strings.ReplaceAll(m[1], "_", "-")
			if len(m[1]) == 32 {
				real = m[1]
			}
			fu, ok := uids[real]
			if !ok {
				return "", false
			}
			pod = fu
			segs[i] = strings.Replace(s, m[1], strings.ReplaceAll(fu, "-", "_"), 1)
		} else if m := runtimeScope.FindStringSubmatch(s); m != nil {
			fake, ok := containers[m[1]]
			if !ok && pod == "" {
				return "", false
			}
			if !ok {
				fake = fakeID("sandbox:"+pod, 64)
			}
			segs[i] = strings.Replace(s, m[1], fake, 1)
		} else if fake, ok := containers[s]; ok {
			segs[i] = fake // a tenant's cgroup named after a container id
		}
	}
	return strings.Join(segs, "/"), true
}

// recordPodLogs writes the kubelet's entries for the test namespace's pods (empty logs, and
// the /var/log/containers links) with the stable ids into dir/var/log.
func recordPodLogs(t *testing.T, ctx context.Context, tg *target, dir string, uids, containers map[string]string) int {
	must(t, os.RemoveAll(dir))
	out, err := tg.Node.Exec(ctx, "sh", "-c", `find /var/log/pods -type f; for l in /var/log/containers/*; do echo "$l -> $(readlink "$l")"; done`)
	must(t, err)
	repl := func(s string) string {
		for real, fake := range uids {
			s = strings.ReplaceAll(s, real, fake)
		}
		for real, fake := range containers {
			s = strings.ReplaceAll(s, real, fake)
		}
		return s
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.Contains(line, "/"+ns+"_") && !strings.Contains(line, "_"+ns+"_") {
			continue
		}
		line = repl(line)
		link, target, isLink := strings.Cut(line, " -> ")
		p := filepath.Join(dir, link)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		if isLink {
			must(t, os.Symlink(target, p))
		} else {
			must(t, os.WriteFile(p, nil, 0o644))
		}
		n++
	}
	return n
}

// The recorded paths carry stable ids: a pod slice and its containers get the fake ids of
// their names, a scope of no known container in a kept pod is its sandbox, and the cgroups of
// other pods are dropped.
func TestFakePath(t *testing.T) {
	const (
		uid    = "6b2c3f9a-1d2e-4f5a-8b9c-0d1e2f3a4b5c"
		static = "3e9f3936a1b2c3d4e5f60718293a4b5c"
	)
	ctr, sandbox, other := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	uids := map[string]string{uid: fakeUID("kubenode/p", uid), static: fakeUID("kubenode/s", static)}
	containers := map[string]string{ctr: fakeID("ctr:kubenode/p/c", 64)}
	fu := strings.ReplaceAll(uids[uid], "-", "_")
	for _, c := range []struct{ in, want string }{
		{"./cpu.stat", "./cpu.stat"},
		{"kubepods.slice/kubepods-burstable.slice/cpu.max", "kubepods.slice/kubepods-burstable.slice/cpu.max"},
		{"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + ctr + ".scope/container/cpu.max",
			"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + fu + ".slice/cri-containerd-" + containers[ctr] + ".scope/container/cpu.max"},
		{"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + sandbox + ".scope/cgroup.procs",
			"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + fu + ".slice/cri-containerd-" + fakeID("sandbox:"+uids[uid], 64) + ".scope/cgroup.procs"},
		{"kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + sandbox + ".scope/x/" + ctr + "/memory.max",
			"kubepods.slice/kubepods-pod" + fu + ".slice/cri-containerd-" + fakeID("sandbox:"+uids[uid], 64) + ".scope/x/" + containers[ctr] + "/memory.max"},
		// CRI-O: the container's scope, its conmon's, and a dropped infra container's cgroup.
		{"kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/crio-" + ctr + ".scope/container/cpu.max",
			"kubepods.slice/kubepods-pod" + fu + ".slice/crio-" + containers[ctr] + ".scope/container/cpu.max"},
		{"kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/crio-conmon-" + ctr + ".scope/cgroup.procs",
			"kubepods.slice/kubepods-pod" + fu + ".slice/crio-conmon-" + containers[ctr] + ".scope/cgroup.procs"},
		{"kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/crio-" + sandbox + "/cpu.max",
			"kubepods.slice/kubepods-pod" + fu + ".slice/crio-" + fakeID("sandbox:"+uids[uid], 64) + "/cpu.max"},
		{"kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" + static + ".slice/memory.max", "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" + uids[static] + ".slice/memory.max"},
		{"kubepods.slice/kubepods-pod11112222_3333_4444_5555_666677778888.slice/cpu.max", ""},
		{"system.slice/cri-containerd-" + other + ".scope/cpu.max", ""},
	} {
		got, keep := fakePath(c.in, uids, containers)
		if c.want == "" && keep || c.want != "" && got != c.want {
			errorf(t, "fakePath(%s) = %s, %t; want %q", c.in, got, keep, c.want)
		}
	}
	if u := uids[uid]; len(u) != 36 || strings.Count(u, "-") != 4 || len(uids[static]) != 32 {
		errorf(t, "fake UIDs %q, %q keep the real ones' forms", u, uids[static])
	}
}
