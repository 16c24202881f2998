package jvm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/hsperfdata"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// maxKeptPerJVM bounds what the inspector and the caller keep per JVM (its cache entry and
// the Info of one scrape), whatever its perf data file holds.
const maxKeptPerJVM = 16 << 10

// Processes named java, each with a 1 MiB perf data file of 40 000 tiny entries: the
// inspector kept every entry's layout (3.4 MiB per JVM: 70 of them killed the exporter in a
// 256 MiB limit). A file without the VM start-time counter is now refused, as a file whose
// owner cannot be told (no_start_time); one with a start time that matches the process is
// read, and of it only the counters the exporter uses are kept.
func TestCraftedPerfDataKeptBounded(t *testing.T) {
	testutil.RequireRoot(t)
	const jvms = 24
	for _, c := range []struct {
		name      string
		startTime bool
		want      Reason // "": perf data available
	}{
		{"without a VM start time", false, Reason("no_start_time")},
		{"with the process's VM start time", true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			procs := make([]Process, jvms)
			for i := range procs {
				j, p := jailedJava(t)
				f := testutil.CraftedPerfData{Entries: 40000, Padding: hsperfdata.MaxFileSize}
				if c.startTime {
					f.VMStartMillis = time.Now().UnixMilli()
				}
				j.WriteFile(t, fmt.Sprintf("tmp/hsperfdata_root/%d", p.PID), f.Bytes())
				procs[i] = p
			}
			in := &Inspector{}
			infos := make([]*Info, jvms)
			kept := testutil.Retained(func() any {
				for i, p := range procs {
					info, err := in.InspectProcess(context.Background(), p, CgroupCPU{})
					if err != nil {
						t.Fatal(err)
					}
					infos[i] = info
				}
				return infos
			})
			per := kept / jvms
			t.Logf("%d JVMs keep %d KiB: %d bytes each (bound %d); first: available %v, unavailable %v",
				jvms, kept>>10, per, maxKeptPerJVM, infos[0].PerfDataAvailable(), infos[0].Unavailable)
			if per > maxKeptPerJVM {
				t.Errorf("%d bytes kept per JVM, bound %d", per, maxKeptPerJVM)
			}
			for _, info := range infos {
				switch {
				case c.want == "" && !info.PerfDataAvailable():
					t.Errorf("pid %d: perf data unavailable: %v", info.PID, info.Unavailable)
				case c.want != "" && (info.PerfDataAvailable() || info.Unavailable == nil || info.Unavailable.Reason != c.want):
					t.Errorf("pid %d: perf data %v, unavailable %v; want %s", info.PID, info.PerfDataAvailable(), info.Unavailable, c.want)
				}
			}
		})
	}
}

// A tenant's /etc/passwd of 1 MiB of empty lines (the read's cap) cost a slice per line (24
// MiB); the lookup now allocates nothing per line.
func TestPasswdLookupBounded(t *testing.T) {
	b := make([]byte, maxPasswd)
	for i := range b {
		b[i] = '\n'
	}
	copy(b[len(b)-32:], "app:x:4242:4242::/:/bin/sh\n")
	var has bool
	n := testutil.Allocated(func() { has = passwdHasUID(b, 4242) })
	if !has || n > 4<<10 {
		t.Errorf("found %v; allocated %d bytes for a %d-byte passwd", has, n, len(b))
	}
}
