package node

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
	"github.com/quota-exporter/quota_exporter/test/v2/vm"
)

func TestZZLocalBoot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	h := vm.Find(t)
	r, err := BuildVMRoot(ctx, h, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	agent := filepath.Join(work, "vmagent")
	testenv.BuildGo(t, filepath.Join(testenv.RepoRoot(), "test"), "./kubenode/node/vmagent", agent)
	bin := filepath.Join(work, "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "kubelet"), []byte("#!/bin/sh\nsleep 1000\n"), 0o755)
	dir, lock, err := claim(vmKind)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	cleanStaleVMs(t.Logf)
	os.MkdirAll(dir, 0o755)
	defer cleanupVM(dir, t.Logf)
	for _, args := range [][]string{{"tuntap", "add", "dev", Tap, "mode", "tap"}, {"addr", "add", TapHostIP + "/24", "dev", Tap}, {"link", "set", Tap, "up"}, {"route", "add", VMPodSubnet, "via", VMIP, "dev", Tap}} {
		if _, err := run(ctx, 30*time.Second, nil, "ip", args...); err != nil {
			t.Fatal(err)
		}
	}
	p, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	o := &VMOptions{Bin: bin, Host: h, Root: r, Agent: agent, CPUs: 4, MemoryMiB: 3072, Logf: t.Logf,
		PauseImage: Image{Ref: "quota-kubenode/pause:test", Files: map[string]string{"/pause": "/bin/busybox"}, Entrypoint: []string{"/pause"}}}
	c := &Cluster{ControlPlane: &ControlPlane{Dir: dir, pki: p, APIServer: "https://" + TapHostIP + ":6443"}, vm: o}
	n := &VMNode{spec: VMSpec{Name: "zz"}, dir: filepath.Join(dir, "nodes", "zz"), ps: &procSet{dir: filepath.Join(dir, "nodes", "zz"), logf: t.Logf}, client: newAgentClient()}
	t0 := time.Now()
	disk, err := c.writeDataDisk(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	err = n.boot(ctx, o, disk)
	t2 := time.Now()
	defer n.stop()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.startRuntime(ctx); err != nil {
		t.Fatal(err)
	}
	t3 := time.Now()
	t.Logf("disk %s boot %s runtime %s", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2))
	for _, cmd := range [][]string{{"systemd-analyze"}, {"systemd-analyze", "blame"}, {"ctr", "-n", "k8s.io", "images", "ls", "-q"}, {"cat", "/sys/fs/cgroup/cgroup.subtree_control"}, {"systemctl", "--failed", "--no-pager"}, {"sh", "-c", "find /sys/fs/cgroup -maxdepth 2 -type d"}} {
		out, err := n.Exec(ctx, cmd...)
		t.Logf("%v: %v\n%s", cmd, err, out)
	}
}
