package jvm

import (
	"context"
	"fmt"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// BenchmarkReadPerfData: what one JVM's perf data read costs through procroot (root opened,
// name resolved inside it, O_PATH + fstat, reopened through /proc/thread-self/fd, read), with
// the name known from the last scrape (the steady state) and with the tenant's /tmp listed.
func BenchmarkReadPerfData(b *testing.B) {
	testutil.RequireRoot(b)
	j := testutil.NewJail(b)
	j.Install(b, testutil.Sleeper(b), "jdk/bin/java")
	cmd := j.Start(b, "/jdk/bin/java", nil)
	pid := cmd.Process.Pid
	name := fmt.Sprintf("/tmp/hsperfdata_root/%d", pid)
	j.WriteFile(b, name, testutil.ReadGzip(b, "../hsperfdata/testdata/jdk17-g1.hsperf.gz"))
	for i := range 20 { // a /tmp with some other files
		j.WriteFile(b, fmt.Sprintf("tmp/f%d", i), nil)
	}
	st := procStatus{NSPid: pid, UID: 0}
	for _, c := range []struct{ name, known string }{{"known name", name}, {"tmp listed", ""}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, data, err := readPerfData(context.Background(), "/proc", pid, st, c.known); err != nil || len(data) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
