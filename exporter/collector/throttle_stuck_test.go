//go:build linux

package collector

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/fdbudget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
	"github.com/quota-exporter/quota_exporter/exporter/internal/throttle"
)

// A sampler read of a cgroup's cpu.stat that outlives its time bound (a starved node, a file
// blocked in the kernel) may still use the cgroup's descriptor, which is then kept open. Once
// a later window has read the file again, that read has returned: when the cgroup goes, its
// descriptor is closed and its slot of the descriptor budget given back. Before, a read that
// was only slow leaked both for good.
func TestSamplerStuckReadThatReturnedReleasesDescriptor(t *testing.T) {
	fuse := testutil.MountStuckFUSE(t)
	root := t.TempDir()
	if err := fixture.Write(root, fixture.V2, []fixture.Cgroup{
		{Path: "/slow.scope", PIDs: []int{11}, QuotaUS: 50000, UserUS: 2e6},
	}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "sys/fs/cgroup/slow.scope")
	if err := os.Remove(filepath.Join(dir, "cpu.stat")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fuse.Data, filepath.Join(dir, "cpu.stat")); err != nil {
		t.Fatal(err)
	}
	env, err := NewEnv(Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys")}, promslog.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	env.Descriptors = fdbudget.New(1, 0) // the series' descriptor is the budget's only one
	const window = 200 * time.Millisecond
	c := newThrottleSampler(env, window, nil) // not started: the test runs its windows
	defer c.Close()
	ctx := context.Background()
	c.sampler.Rediscover(ctx)
	openFiles := func() (n int) {
		c.sampler.Read(func(st throttle.State) { n = st.OpenFiles })
		return n
	}
	if n := openFiles(); n != 1 {
		t.Fatalf("the sampler holds %d descriptors, want the slow cgroup's cpu.stat open", n)
	}

	c.sampler.Sample(ctx) // its read blocks in the kernel and outlives half a window
	fuse.WaitRead(t, 5*time.Second)
	fuse.Answer()
	// Later windows read the file again once the first read has returned.
	deadline := time.Now().Add(10 * time.Second)
	for stuckOf(env, "throttle")["cpu.stat"] > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the read that outlived its bound never returned after the server answered")
		}
		time.Sleep(window)
	}
	c.sampler.Sample(ctx)

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	env.Cgroups.Expire()
	c.sampler.Rediscover(ctx)
	if n := len(c.series()); n != 0 {
		t.Fatalf("%d series after the cgroup went, want none", n)
	}
	if n := openFiles(); n != 0 {
		t.Errorf("the sampler still holds %d descriptors after the cgroup went", n)
	}
	if got := env.Descriptors.Take(1); got != 1 {
		t.Errorf("the descriptor budget's slot was not given back (Take(1) = %d)", got)
	}
}
