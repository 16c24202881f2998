package jvm

import (
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procstatus"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// Allocation bounds of the fuzz targets. The inputs are tenant text under their read caps:
// the parsers keep a few numbers and names (maxNameLen), never a copy per field or line.
// ParseCmdline keeps the JVM options it returns, of an argv the caller splits at most
// maxArgs times.
const (
	smallParseAlloc = 16 << 10
	maxCmdlineAlloc = maxArgs*16 + 4<<10
)

func FuzzParseVMArgs(f *testing.F) {
	f.Add("-Xmx64m -XX:+UseG1GC -XX:ActiveProcessorCount=16 -XX:MaxHeapSize=9999999999999999999t")
	f.Add("-XX:+ -XX:- -XX: -XX:=1 -Xmx")
	f.Fuzz(func(t *testing.T, s string) {
		testutil.AllocBound(t, smallParseAlloc, func() { ParseVMArgs(s) })
		argv := strings.SplitN(s, " ", maxArgs)
		var opts []string
		var main string
		testutil.AllocBound(t, maxCmdlineAlloc, func() { opts, main = ParseCmdline(argv) })
		if len(main) > maxNameLen || len(opts) > len(s) {
			t.Fatalf("main %q opts %d", main, len(opts))
		}
		testutil.AllocBound(t, smallParseAlloc, func() { main = MainFromJavaCommand(s) })
		if len(main) > maxNameLen {
			t.Fatalf("main %q", main)
		}
	})
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"17.0.15", "1.8.0_372", "25-ea", "11.0.13+8", "1.", "1._"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v Version
		var ok bool
		testutil.AllocBound(t, smallParseAlloc, func() { v, ok = ParseVersion(s) })
		if ok && v.Feature <= 0 {
			t.Fatalf("%q → %+v", s, v)
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("NSpid:\t4242\t1\nUid:\t0\t0\t0\t0\nCpus_allowed_list:\t0-3,8\n"), 1)
	f.Add([]byte("NSpid:\nCpus_allowed_list:\t5-1,-,\n"), 1)
	f.Fuzz(func(t *testing.T, b []byte, pid int) {
		if len(b) > procstatus.MaxSize {
			return // the read's cap: status is kernel text, its lines converted to strings
		}
		s := string(b)
		testutil.AllocBound(t, procstatus.MaxSize+smallParseAlloc, func() {
			parseStatus(b, pid)
			CountCPUList(s)
		})
	})
}

// FuzzPasswdHasUID and FuzzReleaseVersion: the two files read from a tenant's root besides
// perf data (hsperfdata has FuzzParse) never panic, nor cost more than smallParseAlloc.
func FuzzPasswdHasUID(f *testing.F) {
	f.Add([]byte("root:x:0:0::/root:/bin/sh\napp:x:1000:1000::/:/bin/sh\n"), 1000)
	f.Add([]byte(":::\n\n:"), -1)
	f.Fuzz(func(t *testing.T, b []byte, uid int) {
		testutil.AllocBound(t, smallParseAlloc, func() { _ = passwdHasUID(b, uid) })
	})
}

func FuzzReleaseVersion(f *testing.F) {
	f.Add([]byte("IMPLEMENTOR=\"Eclipse Adoptium\"\nJAVA_VERSION=\"17.0.15\"\n"))
	f.Add([]byte("JAVA_VERSION=\"1.8.0_412\""))
	f.Add([]byte("JAVA_VERSION=\"99999999999999999999.0\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		testutil.AllocBound(t, smallParseAlloc, func() { _ = releaseVersion(b) })
	})
}
