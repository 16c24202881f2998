package jvm

import (
	"strings"
	"testing"
)

func FuzzParseVMArgs(f *testing.F) {
	f.Add("-Xmx64m -XX:+UseG1GC -XX:ActiveProcessorCount=16 -XX:MaxHeapSize=9999999999999999999t")
	f.Add("-XX:+ -XX:- -XX: -XX:=1 -Xmx")
	f.Fuzz(func(t *testing.T, s string) {
		ParseVMArgs(s)
		opts, main := ParseCmdline(strings.Split(s, " "))
		if len(main) > maxNameLen || len(opts) > len(s) {
			t.Fatalf("main %q opts %d", main, len(opts))
		}
		if m := MainFromJavaCommand(s); len(m) > maxNameLen {
			t.Fatalf("main %q", m)
		}
	})
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"17.0.15", "1.8.0_372", "25-ea", "11.0.13+8", "1.", "1._"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, ok := ParseVersion(s); ok && v.Feature <= 0 {
			t.Fatalf("%q → %+v", s, v)
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("NSpid:\t4242\t1\nUid:\t0\t0\t0\t0\nCpus_allowed_list:\t0-3,8\n"), 1)
	f.Add([]byte("NSpid:\nCpus_allowed_list:\t5-1,-,\n"), 1)
	f.Fuzz(func(t *testing.T, b []byte, pid int) {
		parseStatus(b, pid)
		CountCPUList(string(b))
	})
}

// FuzzPasswdHasUID and FuzzReleaseVersion: the two files read from a tenant's root besides
// perf data (hsperfdata has FuzzParse) never panic.
func FuzzPasswdHasUID(f *testing.F) {
	f.Add([]byte("root:x:0:0::/root:/bin/sh\napp:x:1000:1000::/:/bin/sh\n"), 1000)
	f.Add([]byte(":::\n\n:"), -1)
	f.Fuzz(func(t *testing.T, b []byte, uid int) { _ = passwdHasUID(b, uid) })
}

func FuzzReleaseVersion(f *testing.F) {
	f.Add([]byte("IMPLEMENTOR=\"Eclipse Adoptium\"\nJAVA_VERSION=\"17.0.15\"\n"))
	f.Add([]byte("JAVA_VERSION=\"1.8.0_412\""))
	f.Add([]byte("JAVA_VERSION=\"99999999999999999999.0\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) { _ = releaseVersion(b) })
}
