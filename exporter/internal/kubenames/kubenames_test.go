package kubenames

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

const fixture = "testdata/node/var/log" // a node's /var/log as the kubelet writes it

func TestResolveFixture(t *testing.T) {
	r := New(fixture, Options{})
	for _, tc := range []struct {
		uid  string
		want Pod
	}{
		{"6f1c2a9e-8b4d-4c1e-9a2b-5d6e7f8a9b0c", Pod{"shop", "checkout-7d9f8b6c5-x2kqp"}},
		// the systemd driver's kubepods-burstable-pod6f1c2a9e_8b4d_....slice form
		{"6f1c2a9e_8b4d_4c1e_9a2b_5d6e7f8a9b0c", Pod{"shop", "checkout-7d9f8b6c5-x2kqp"}},
		{"8a3f5e2b9c1d4f6a7b8c9d0e1f2a3b4c", Pod{"kube-system", "etcd-node-1"}}, // static pod: config hash
		{"aaaabbbb-cccc-4ddd-8eee-ffff00001111", Pod{"default", "web.v2-5c8d7"}},
	} {
		got, ok := r.Pod(tc.uid)
		if !ok || got != tc.want {
			t.Errorf("Pod(%s) = %+v, %v; want %+v", tc.uid, got, ok, tc.want)
		}
	}
	for _, tc := range []struct {
		id   string
		want Container
	}{
		{"containerd://3b0e0d6f0a1c4e5d8f2a7b9c1d3e5f708192a3b4c5d6e7f8091a2b3c4d5e6f70", Container{"shop", "checkout-7d9f8b6c5-x2kqp", "app"}},
		{"cri-o://9a8b7c6d5e4f30211203f4e5d6c7b8a99a8b7c6d5e4f30211203f4e5d6c7b8a9", Container{"shop", "checkout-7d9f8b6c5-x2kqp", "istio-proxy"}},
		{"c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00", Container{"kube-system", "kube-proxy-7xk2p", "kube-proxy"}},
		{"docker://2222222222222222222222222222222222222222222222222222222222222222", Container{"monitoring", "prometheus-k8s-0", "prometheus"}},
	} {
		got, ok := r.Container(tc.id, "")
		if !ok || got != tc.want {
			t.Errorf("Container(%s) = %+v, %v; want %+v", tc.id, got, ok, tc.want)
		}
	}
	for _, miss := range []string{"", "6f1c2a9e-8b4d-4c1e-9a2b-5d6e7f8a9b0d", "not-a-uid"} {
		if p, ok := r.Pod(miss); ok {
			t.Errorf("Pod(%q) = %+v, want a miss", miss, p)
		}
	}
	if c, ok := r.Container("containerd://"+fmt.Sprintf("%064d", 0), ""); ok {
		t.Errorf("unknown container resolved to %+v", c)
	}
	s := r.Stats()
	// pods/: README, not_a_pod, Shop_Upper_... ; containers/: garbage.log, pod_ns_name-nothex.log, *.log.1
	if s.Pods != 5 || s.Containers != 6 || s.Malformed != 6*s.Refreshes || s.ReadErrors != 0 {
		t.Errorf("stats %+v: want 5 pods, 6 containers, 6 malformed per refresh, no read errors", s)
	}
}

// A lookup serves the cached map until Interval; a miss refreshes early, at most every MissInterval.
func TestRefreshInterval(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"pods", "containers"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Unix(1000, 0)
	r := New(dir, Options{Interval: time.Minute, MissInterval: 10 * time.Second, Now: func() time.Time { return now }})
	const uid = "11111111-2222-4333-8444-555555555555"
	if _, ok := r.Pod(uid); ok {
		t.Fatal("resolved a pod before it exists")
	}
	if err := os.Mkdir(filepath.Join(dir, "pods", "ns_p_"+uid), 0o755); err != nil {
		t.Fatal(err)
	}
	now = now.Add(5 * time.Second)
	if _, ok := r.Pod(uid); ok {
		t.Error("refreshed before MissInterval")
	}
	now = now.Add(6 * time.Second)
	if p, ok := r.Pod(uid); !ok || p != (Pod{"ns", "p"}) {
		t.Errorf("after MissInterval: %+v %v", p, ok)
	}
	refreshes := r.Stats().Refreshes
	now = now.Add(30 * time.Second)
	r.Pod(uid) // hit, within Interval
	if got := r.Stats().Refreshes; got != refreshes {
		t.Errorf("a hit within Interval refreshed (%d -> %d)", refreshes, got)
	}
	// The pod goes away: its name stays until the next scheduled refresh, then it is forgotten.
	if err := os.Remove(filepath.Join(dir, "pods", "ns_p_"+uid)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(31 * time.Second)
	if _, ok := r.Pod(uid); ok {
		t.Error("a removed pod still resolves after Interval")
	}
}

func TestMaxEntries(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "pods"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 600; i++ {
		if err := os.Mkdir(filepath.Join(dir, "pods", fmt.Sprintf("ns_p%d_%032x", i, i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := New(dir, Options{MaxEntries: 500})
	r.Refresh()
	if s := r.Stats(); s.Pods != 500 || s.Truncated != 100 {
		t.Errorf("stats %+v: want 500 pods kept and 100 truncated", s)
	}
}

// Only names are read: a containers/ entry that is a FIFO (or a symlink to one) would block an open.
func TestNeverOpensEntries(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "containers"), 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	id := fmt.Sprintf("%064x", 7)
	if err := os.Symlink(fifo, filepath.Join(dir, "containers", "p_ns_c-"+id+".log")); err != nil {
		t.Fatal(err)
	}
	done := make(chan Container)
	go func() { c, _ := New(dir, Options{}).Container(id, ""); done <- c }()
	select {
	case c := <-done:
		if c != (Container{"ns", "p", "c"}) {
			t.Errorf("got %+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the resolver blocked: it opened the symlink's target")
	}
}

// An unreadable directory keeps the previous names and counts the error.
func TestReadErrorKeepsNames(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "pods", "ns_p_"+fmt.Sprintf("%032x", 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	r := New(dir, Options{})
	r.Refresh()
	// Replace pods/ by a file: open succeeds, readdir fails with ENOTDIR.
	if err := os.RemoveAll(filepath.Join(dir, "pods")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pods"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.Refresh()
	if _, ok := r.Pod(fmt.Sprintf("%032x", 1)); !ok {
		t.Error("names lost on a read error")
	}
	if s := r.Stats(); s.ReadErrors == 0 || s.LastError == nil {
		t.Errorf("read error not counted: %+v", s)
	}
}

func TestParseNames(t *testing.T) {
	for _, bad := range []string{"", "_", "a_b", "a_b_c_d", "ns_pod_", "NS_pod_" + fmt.Sprintf("%032x", 1), "ns_-pod_" + fmt.Sprintf("%032x", 1), "ns_pod_6f1c2a9e8b4d-4c1e-9a2b-5d6e7f8a9b0c1"} {
		if _, _, ok := ParsePodDir(bad); ok {
			t.Errorf("ParsePodDir(%q) accepted", bad)
		}
	}
	id := fmt.Sprintf("%064x", 1)
	for _, bad := range []string{"", ".log", "p_ns_c" + id + ".log", "p_ns_c-" + id, "p_ns_-" + id + ".log", "p_ns_c-" + id[1:] + ".log", "p_n_s_c-" + id + ".log"} {
		if _, _, ok := ParseContainerLog(bad); ok {
			t.Errorf("ParseContainerLog(%q) accepted", bad)
		}
	}
}

// nameMax is NAME_MAX: the parsers read directory entries' names, and allocate a few small
// strings of them.
const nameMax = 255

func FuzzParsePodDir(f *testing.F) {
	for _, s := range []string{"shop_checkout-7d9f8b6c5-x2kqp_6f1c2a9e-8b4d-4c1e-9a2b-5d6e7f8a9b0c", "kube-system_etcd-node-1_8a3f5e2b9c1d4f6a7b8c9d0e1f2a3b4c", "a_b", "___"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > nameMax {
			return // a directory entry's name
		}
		var uid string
		var p Pod
		var ok bool
		testutil.AllocBound(t, 16<<10, func() { uid, p, ok = ParsePodDir(s) })
		if ok && (NormalizeUID(uid) != uid || p.Namespace == "" || p.Name == "") {
			t.Errorf("ParsePodDir(%q) = %q %+v", s, uid, p)
		}
	})
}

func FuzzParseContainerLog(f *testing.F) {
	for _, s := range []string{"checkout-7d9f8b6c5-x2kqp_shop_app-3b0e0d6f0a1c4e5d8f2a7b9c1d3e5f708192a3b4c5d6e7f8091a2b3c4d5e6f70.log", "p_ns_c-.log", "garbage.log"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > nameMax {
			return // a directory entry's name
		}
		var id string
		var c Container
		var ok bool
		testutil.AllocBound(t, 16<<10, func() { id, c, ok = ParseContainerLog(s) })
		if ok && (NormalizeContainerID(id) != id || c.Namespace == "" || c.Pod == "" || c.Name == "") {
			t.Errorf("ParseContainerLog(%q) = %q %+v", s, id, c)
		}
	})
}

// kubeletLink writes what the kubelet writes for one container: pods/<ns>_<pod>_<uid>/<ctr>/
// and the containers/ link, its name cut at 251 characters before ".log" as kuberuntime's
// logSymlink cuts it, pointing at the host's /var/log/pods path. It returns the link's name.
func kubeletLink(t *testing.T, dir, ns, pod, uid, ctr, id string) string {
	t.Helper()
	podDir := ns + "_" + pod + "_" + uid
	if err := os.MkdirAll(filepath.Join(dir, "pods", podDir, ctr), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "containers"), 0o755); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s_%s_%s-%s", pod, ns, ctr, id)
	if len(name) > 251 {
		name = name[:251]
	}
	name += ".log"
	if err := os.Symlink("/var/log/pods/"+podDir+"/"+ctr+"/0.log", filepath.Join(dir, "containers", name)); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestCutLinks: pods whose names make the kubelet cut the link name, inside the container id
// or before it, are named from the link's target; the cut id must be a prefix of the id
// asked for, in the pod asked for, and name one container.
func TestCutLinks(t *testing.T) {
	dir := t.TempDir()
	const (
		uid  = "6f1c2a9e-8b4d-4c1e-9a2b-5d6e7f8a9b0c"
		uid2 = "11111111-2222-4333-8444-555555555555"
	)
	longPod := strings.Repeat("p", 200) // valid (no label limit in a pod name); namespace, pod and uid fit a pods/ name
	idA, idB, idC := strings.Repeat("a", 60)+"0001", strings.Repeat("b", 64), strings.Repeat("c", 64)
	if n := kubeletLink(t, dir, "team", longPod, uid, "app", idA); !strings.HasSuffix(n, "-"+idA[:len(n)-4-len(longPod+"_team_app-")]+".log") || len(n) != MaxLinkName {
		t.Fatalf("link %q is not cut inside the id", n)
	}
	// A long container name: nothing of the id is left; two of them in one pod cannot be told apart.
	sidecar, other := strings.Repeat("s", 63), strings.Repeat("o", 63)
	kubeletLink(t, dir, "team", longPod, uid2, sidecar, idB)
	kubeletLink(t, dir, "team", longPod, uid2, other, idC)
	r := New(dir, Options{})
	for _, tc := range []struct {
		id, uid string
		want    Container
		ok      bool
	}{
		{"containerd://" + idA, uid, Container{"team", longPod, "app"}, true},
		{"containerd://" + idA, "", Container{}, false},                                                // pod unknown
		{"containerd://" + idA, uid2, Container{}, false},                                              // another pod
		{"containerd://" + strings.Repeat("a", 10) + strings.Repeat("b", 54), uid, Container{}, false}, // not the cut id's container
		{"containerd://" + idB, uid2, Container{}, false},                                              // two containers' links match
		{"containerd://" + strings.Repeat("d", 64), uid, Container{}, false},                           // no prefix match
	} {
		if got, ok := r.Container(tc.id, tc.uid); got != tc.want || ok != tc.ok {
			t.Errorf("Container(%s, %s) = %+v %v, want %+v %v", tc.id[:20], tc.uid, got, ok, tc.want, tc.ok)
		}
	}
	// The other container is gone: the one link left of the pod, cut before the id, names
	// every container id of the pod (a restart gets a new id, and the same link name).
	for _, n := range mustReadDir(t, filepath.Join(dir, "containers")) {
		if strings.Contains(n, "_team_"+other[:20]) {
			os.Remove(filepath.Join(dir, "containers", n))
		}
	}
	r.Refresh()
	for _, id := range []string{idB, strings.Repeat("e", 64)} {
		if got, ok := r.Container(id, uid2); !ok || got != (Container{"team", longPod, sidecar}) {
			t.Errorf("sidecar %s…: %+v %v", id[:8], got, ok)
		}
	}
	if s := r.Stats(); s.Malformed != 0 {
		t.Errorf("cut links counted as malformed: %+v", s)
	}
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestParseCutLink(t *testing.T) {
	pod := strings.Repeat("p", 200)
	name := (pod + "_ns_c-" + strings.Repeat("f", 64))[:251] + ".log"
	for _, tc := range []struct {
		name, target string
		ok           bool
	}{
		{name, "/var/log/pods/ns_" + pod + "_" + fmt.Sprintf("%032x", 1) + "/c/0.log", true},
		{name, "/var/log/pods/ns_" + pod + "_" + fmt.Sprintf("%032x", 1) + "/c/12.log", true},
		{name, "/var/log/pods/ns_" + pod + "_" + fmt.Sprintf("%032x", 1) + "/d/0.log", false},      // another container's name
		{name, "/var/log/pods/other_" + pod + "_" + fmt.Sprintf("%032x", 1) + "/c/0.log", false},   // another namespace
		{name, "/var/log/elsewhere/ns_" + pod + "_" + fmt.Sprintf("%032x", 1) + "/c/0.log", false}, // not pods/
		{name, "/var/log/pods/ns_" + pod + "_" + fmt.Sprintf("%032x", 1) + "/c/x.log", false},
		{name, "0.log", false},
		{strings.Repeat("x", 251) + ".log", "/var/log/pods/ns_" + pod + "_" + fmt.Sprintf("%032x", 1) + "/c/0.log", false},
	} {
		if _, _, _, ok := ParseCutLink(tc.name, tc.target); ok != tc.ok {
			t.Errorf("ParseCutLink(…, %q) ok = %v, want %v", tc.target[max(0, len(tc.target)-40):], ok, tc.ok)
		}
	}
}

func FuzzParseCutLink(f *testing.F) {
	pod := strings.Repeat("p", 200)
	f.Add((pod + "_ns_c-" + strings.Repeat("f", 64))[:251]+".log", "/var/log/pods/ns_"+pod+"_"+fmt.Sprintf("%032x", 1)+"/c/0.log")
	f.Add("a_b_c-.log", "pods/b_a_00000000000000000000000000000001/c/0.log")
	f.Fuzz(func(t *testing.T, name, target string) {
		uid, prefix, c, ok := ParseCutLink(name, target)
		if ok && (NormalizeUID(uid) != uid || len(prefix) >= 64 || c.Namespace == "" || c.Pod == "" || c.Name == "") {
			t.Errorf("ParseCutLink(%q, %q) = %q %q %+v", name, target, uid, prefix, c)
		}
	})
}
