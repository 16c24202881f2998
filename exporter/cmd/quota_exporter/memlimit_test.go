//go:build linux

package main

import (
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

var goMemLimitRE = regexp.MustCompile(`(?m)^go_gc_gomemlimit_bytes (\S+)$`)

func goMemLimit(t *testing.T, addr string) float64 {
	t.Helper()
	m := goMemLimitRE.FindStringSubmatch(get(t, "http://"+addr+"/metrics"))
	if m == nil {
		t.Fatal("no go_gc_gomemlimit_bytes")
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestGoMemLimitFromCgroup (cgroup v1; the v2 case is test/v2's TestGoMemLimit): the
// exporter in a cgroup whose parent (the pod) limits memory to 192 MiB runs with GOMEMLIMIT
// 0.9 of it; a GOMEMLIMIT in the environment wins; --runtime.gomemlimit-ratio=0 and no limit
// leave the runtime's default (no limit).
func TestGoMemLimitFromCgroup(t *testing.T) {
	bin := buildExporter(t)
	pod := testutil.NewCgroup(t, "tenantsurface-memlimit", testutil.CgroupOptions{MemoryLimit: 192 << 20})
	ctr := pod.Child("exporter", testutil.CgroupOptions{})
	for _, c := range []struct {
		name string
		cg   *testutil.Cgroup
		env  []string
		args []string
		want float64
	}{
		{"pod limit", ctr, nil, nil, math.Floor(0.9 * (192 << 20))},
		{"environment wins", ctr, []string{"GOMEMLIMIT=100MiB"}, nil, 100 << 20},
		{"ratio 0", ctr, nil, []string{"--runtime.gomemlimit-ratio=0"}, math.MaxInt64},
		{"no limit", nil, nil, nil, math.MaxInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := freeAddr(t)
			argv := append([]string{bin, "--web.listen-address=" + addr, "--no-collector.throttle"}, c.args...)
			var cmd *exec.Cmd
			if c.cg != nil {
				cmd = c.cg.Command(argv[0], argv[1:]...)
			} else {
				cmd = exec.Command(argv[0], argv[1:]...)
			}
			cmd.Env = append(cmd.Environ(), c.env...)
			runExporter(t, cmd, addr)
			if got := goMemLimit(t, addr); got != c.want {
				t.Errorf("go_gc_gomemlimit_bytes %s, want %s", fmt.Sprint(int64(got)), fmt.Sprint(int64(c.want)))
			}
		})
	}
}
