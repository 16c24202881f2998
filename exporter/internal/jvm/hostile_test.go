package jvm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// Hostile tenants: a process named java whose root (a chroot here, a container in
// production) holds symlinks and FIFOs where the exporter reads. Everything the reader opens
// below /proc/<pid>/root must be resolved inside that root, and nothing there may block it.

// victimJVM runs a real JVM on the host (outside any jail) and returns its pid and the path
// of its perf data file: the data a hostile tenant would like exported as its own.
func victimJVM(t *testing.T) (int, string) {
	t.Helper()
	classes := compileQuotaBusy(t)
	cmd := exec.Command(testutil.LookPath(t, "java"), "-Xshare:auto", "-Xmx32m", "-cp", classes, "QuotaBusy", "idle")
	out := testutil.StartPiped(t, cmd)
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l := <-line:
		if !strings.HasPrefix(l, "ready") {
			t.Fatalf("victim JVM said %q", l)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("victim JVM not ready in 40 s")
	}
	pid := cmd.Process.Pid
	return pid, filepath.Join("/tmp", "hsperfdata_root", strconv.Itoa(pid))
}

// linkOrCopy puts the victim's perf data at dst: a hard link (the live file) where /tmp and
// dst share a file system, else a copy.
func linkOrCopy(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Link(src, dst) == nil {
		return
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// jailedJava starts the sleeper as /jdk/bin/java in a new jail and returns the jail and
// what process discovery would hand the inspector about it (exe as the tenant sees it).
func jailedJava(t *testing.T) (*testutil.Jail, Process) {
	t.Helper()
	j := testutil.NewJail(t)
	j.Install(t, testutil.Sleeper(t), "jdk/bin/java")
	j.MkdirAll(t, "tmp")
	cmd := j.Start(t, "/jdk/bin/java", nil)
	pid := cmd.Process.Pid
	start, err := readStartTicks(context.Background(), "/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	return j, Process{PID: pid, NSPid: pid, UID: 0, Comm: "java", Exe: "/jdk/bin/java", StartTicks: start, Threads: runtime.NumCPU()}
}

func rel(t *testing.T, from, to string) string {
	t.Helper()
	r, err := filepath.Rel(from, to)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The escape of issue 21 (and its kin): a process named java in a chroot whose /tmp (or
// /tmp/hsperfdata_root, or the perf data file) is a symlink, absolute or relative, to a
// directory outside its root, made the exporter read another JVM's perf data there and
// export it under the tenant's cgroup. Resolved inside the root, each symlink leads nowhere.
func TestPerfDataSymlinkStaysInRoot(t *testing.T) {
	testutil.RequireRoot(t)
	_, victimFile := victimJVM(t)
	victimReady := time.Now()
	for _, c := range []struct {
		name string
		// link returns the jail path to replace and the symlink target, given the jail, the
		// jailed pid and the outside directory holding hsperfdata_root/<pid>.
		link func(j *testutil.Jail, pid int, outside string) (name, target string)
	}{
		{"tmp absolute", func(j *testutil.Jail, _ int, out string) (string, string) { return "tmp", out }},
		{"tmp relative", func(j *testutil.Jail, _ int, out string) (string, string) { return "tmp", rel(t, j.Dir, out) }},
		{"hsperfdata dir absolute", func(j *testutil.Jail, _ int, out string) (string, string) {
			return "tmp/hsperfdata_root", filepath.Join(out, "hsperfdata_root")
		}},
		{"hsperfdata dir relative", func(j *testutil.Jail, _ int, out string) (string, string) {
			return "tmp/hsperfdata_root", rel(t, j.Path("tmp"), filepath.Join(out, "hsperfdata_root"))
		}},
		{"perf data file absolute", func(j *testutil.Jail, pid int, out string) (string, string) {
			return fmt.Sprintf("tmp/hsperfdata_root/%d", pid), filepath.Join(out, "hsperfdata_root", strconv.Itoa(pid))
		}},
		{"perf data file relative", func(j *testutil.Jail, pid int, out string) (string, string) {
			return fmt.Sprintf("tmp/hsperfdata_root/%d", pid), rel(t, j.Path("tmp/hsperfdata_root"), filepath.Join(out, "hsperfdata_root", strconv.Itoa(pid)))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, p := jailedJava(t)
			outside := t.TempDir() // the exporter's filesystem, not the tenant's
			linkOrCopy(t, victimFile, filepath.Join(outside, "hsperfdata_root", strconv.Itoa(p.PID)))
			name, target := c.link(j, p.PID, outside)
			j.Symlink(t, target, name)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			info, err := (&Inspector{}).InspectProcess(ctx, p, CgroupCPU{})
			if err != nil {
				t.Fatalf("InspectProcess: %v", err)
			}
			if info.PerfDataAvailable() {
				t.Fatalf("%s -> %s: exported perf data from outside the process's root (%d entries, VM %q)",
					name, target, len(info.PerfData.Entries()), info.VMName)
			}
			if info.Unavailable == nil || info.Unavailable.Reason != ReasonNotFound {
				t.Errorf("unavailable = %v, want not_found", info.Unavailable)
			}
		})
	}
	// A perf data file really inside the tenant's root but written by another JVM (a copy,
	// or a /tmp shared between containers whose pids collide) is not the process's: the VM
	// start time in the file must match the process's start time. The victim's VM started
	// before its ready line, so by now well before the tenant's process.
	t.Run("another JVM's file inside the root", func(t *testing.T) {
		time.Sleep(time.Until(victimReady.Add(perfStartBefore + time.Second)))
		j, p := jailedJava(t)
		linkOrCopy(t, victimFile, j.Path(fmt.Sprintf("tmp/hsperfdata_root/%d", p.PID)))
		info, err := (&Inspector{}).InspectProcess(context.Background(), p, CgroupCPU{})
		if err != nil {
			t.Fatal(err)
		}
		if info.PerfDataAvailable() || info.Unavailable == nil || info.Unavailable.Reason != ReasonStale {
			t.Fatalf("perf data %v, unavailable %v; want stale", info.PerfDataAvailable(), info.Unavailable)
		}
	})
}

// /etc/passwd and <java.home>/release are read below the process root too: a symlink out of
// the root is resolved inside it, and a FIFO at either neither blocks the reader nor leaves a
// goroutine behind.
func TestPasswdAndReleaseStayInRoot(t *testing.T) {
	testutil.RequireRoot(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "passwd"), []byte("x:x:4242:4242::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "release"), []byte("JAVA_VERSION=\"99.0.1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	type setup func(j *testutil.Jail)
	links := map[string]setup{
		"etc absolute": func(j *testutil.Jail) { j.Symlink(t, outside, "etc"); j.Symlink(t, outside, "jdk") },
		"etc relative": func(j *testutil.Jail) {
			j.Symlink(t, rel(t, j.Dir, outside), "etc")
			j.Symlink(t, rel(t, j.Dir, outside), "jdk")
		},
		"file absolute": func(j *testutil.Jail) {
			j.Symlink(t, outside+"/passwd", "etc/passwd")
			j.Symlink(t, outside+"/release", "jdk/release")
		},
		"file relative": func(j *testutil.Jail) {
			j.Symlink(t, rel(t, j.Path("etc"), outside+"/passwd"), "etc/passwd")
			j.Symlink(t, rel(t, j.Path("jdk"), outside+"/release"), "jdk/release")
		},
		"magic link to host /": func(j *testutil.Jail) {
			j.Symlink(t, "/proc/1/root"+outside, "etc")
			j.Symlink(t, "/proc/1/root"+outside, "jdk")
		},
		"fifo at passwd and release": func(j *testutil.Jail) { j.Mkfifo(t, "etc/passwd"); j.Mkfifo(t, "jdk/release") },
	}
	for name, set := range links {
		t.Run(name, func(t *testing.T) {
			j, p := jailedJava(t)
			set(j)
			before := runtime.NumGoroutine()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			begin := time.Now()
			if has, ok := hasPasswdEntry(ctx, "/proc", p.PID, 4242); has || ok {
				t.Errorf("passwd: has=%v ok=%v: read a file outside the root", has, ok)
			}
			if v := versionFromRelease(ctx, "/proc", p.PID, p.Exe); v.Known() {
				t.Errorf("release: version %v read from outside the root", v)
			}
			if d := time.Since(begin); d > time.Second {
				t.Errorf("reads took %v: blocked", d)
			}
			time.Sleep(50 * time.Millisecond)
			if after := runtime.NumGoroutine(); after > before {
				t.Errorf("goroutines %d -> %d: a read is still blocked", before, after)
			}
		})
	}
	// The honest layout still works.
	j, p := jailedJava(t)
	j.WriteFile(t, "etc/passwd", []byte("root:x:0:0::/root:/bin/sh\napp:x:4242:4242::/:/bin/sh\n"))
	j.WriteFile(t, "jdk/release", []byte("JAVA_VERSION=\"17.0.15\"\n"))
	if has, ok := hasPasswdEntry(context.Background(), "/proc", p.PID, 4242); !has || !ok {
		t.Errorf("honest passwd: has=%v ok=%v", has, ok)
	}
	if v := versionFromRelease(context.Background(), "/proc", p.PID, p.Exe); v.Feature != 17 {
		t.Errorf("honest release: %v", v)
	}
}

// The perf data directory is the JVM user's: a FIFO, or a file of another owner, at the perf
// data file is not read (and a FIFO does not block); the process's own regular file is.
func TestPerfDataFileMustBeOwnRegularFile(t *testing.T) {
	testutil.RequireRoot(t)
	fixture := loadFixtureBytes(t, "jdk17-g1")
	for _, c := range []struct {
		name string
		set  func(j *testutil.Jail, file string)
		want Reason
	}{
		{"fifo", func(j *testutil.Jail, file string) { j.Mkfifo(t, file) }, ReasonUnreadable},
		{"other owner", func(j *testutil.Jail, file string) {
			j.WriteFile(t, file, fixture)
			if err := os.Chown(j.Path(file), 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}, ReasonUnreadable},
		{"own file", func(j *testutil.Jail, file string) { j.WriteFile(t, file, fixture) }, ReasonStale}, // read, then refused by its old VM start
	} {
		t.Run(c.name, func(t *testing.T) {
			j, p := jailedJava(t)
			c.set(j, fmt.Sprintf("tmp/hsperfdata_root/%d", p.PID))
			begin := time.Now()
			info, err := (&Inspector{}).InspectProcess(context.Background(), p, CgroupCPU{})
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(begin); d > time.Second {
				t.Errorf("took %v", d)
			}
			if info.PerfDataAvailable() || info.Unavailable == nil || info.Unavailable.Reason != c.want {
				t.Fatalf("perf data %v, unavailable %v; want %s", info.PerfDataAvailable(), info.Unavailable, c.want)
			}
		})
	}
}
