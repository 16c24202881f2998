// Package v2 tests the exporter on a real cgroup v2 host: a qemu VM (package vm) in which the
// test creates the cgroups the kubelet and containerd create with the systemd driver, runs
// real programs in them, and compares the exporter's scrape with the kernel's own files read
// at the same moment. One VM boot serves every test of the package (a boot costs ~10 s of
// software emulation on this machine).
package v2

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
	"github.com/quota-exporter/quota_exporter/test/v2/vm"
)

// The cgroups of the scenario, as the kubelet (systemd driver) and containerd name them.
// Pod UIDs are written with '_' in slice names; container ids are 64 hex digits.
type podCgroups struct {
	uid, slice string
}

func pod(parent, qos, uid string) podCgroups {
	name := "kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	if qos != "" {
		name = "kubepods-" + qos + "-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	}
	return podCgroups{uid: uid, slice: parent + "/" + name}
}

func container(p podCgroups, id string) string { return p.slice + "/cri-containerd-" + id + ".scope" }

func hexID(c byte) string { return strings.Repeat(string(c), 64) }

var (
	burstable  = "kubepods.slice/kubepods-burstable.slice"
	besteffort = "kubepods.slice/kubepods-besteffort.slice"

	// Pod A (burstable): limits on the pod and on each container, as the kubelet sets them
	// when every container has limits (the pod's is their sum). Its first container burns CPU
	// with two threads under 0.2 cores; its second runs the Go program under 0.5 cores.
	podA       = pod(burstable, "burstable", "0a0a0a0a-1111-4111-8111-00000000000a")
	throttled  = container(podA, hexID('a'))
	goOwnLimit = container(podA, hexID('b'))
	// Pod B (burstable): the limit is on the pod only (pod-level resources, or containers
	// without limits); its container runs the Go program and a burner.
	podB    = pod(burstable, "burstable", "0b0b0b0b-2222-4222-8222-00000000000b")
	podOnly = container(podB, hexID('c'))
	// Pod C (guaranteed: no QoS slice): the C program with many glibc arenas.
	podC   = pod("kubepods.slice", "", "0c0c0c0c-3333-4333-8333-00000000000c")
	arenas = container(podC, hexID('d'))
	// Pod D (besteffort): no limits, cpu.weight 1 (the kubelet's 2 shares).
	podD = pod(besteffort, "besteffort", "0d0d0d0d-4444-4444-8444-00000000000d")
	idle = container(podD, hexID('e'))
	// Pod E (burstable): a container with 64 MiB whose process is OOM-killed; the test then
	// removes its cgroup, as the runtime does, and starts the "restarted" container.
	podE      = pod(burstable, "burstable", "0e0e0e0e-5555-4555-8555-00000000000e")
	oomed     = container(podE, hexID('f'))
	restarted = container(podE, hexID('9'))
	// A second container of pod E is OOM-killed and removed while the exporter is stopped
	// (SIGSTOP: a watcher that is late, as on a loaded node): its kill comes from the pod's
	// count (the oom collector's fallback).
	lateOOM = container(podE, hexID('8'))
	// A systemd service whose only limit is CPUQuota=30% on its slice.
	batchSlice = "batch.slice"
	service    = "batch.slice/nightly-report.service"
)

// watched are the cgroups whose kernel files the scenario dumps around the scrape: these
// and the JVMs' (watchedCgroups).
var watched = []string{
	"kubepods.slice", burstable, podA.slice, throttled, goOwnLimit, podB.slice, podOnly,
	podC.slice, arenas, besteffort, podD.slice, idle, batchSlice, service,
}

func watchedCgroups() []string {
	out := append([]string{}, watched...)
	if len(jvmCases) > 0 {
		out = append(out, podF.slice, podG.slice)
	}
	for _, c := range jvmCases {
		out = append(out, c.cgroup)
	}
	return out
}

// scenario is the script run inside the VM. The workloads are frozen (cgroup.freeze) while
// the files are read, the exporter scraped and the files read again, so both reads see the
// same counters; the test still accepts any value between the two reads.
const startExporter = "/bin/quota_exporter --web.listen-address=127.0.0.1:10137 --process.min-resident=0 --memory.detail --web.disable-exporter-metrics --log.level=info > /tmp/exporter.log 2>&1 &"

func scenario(jvms []jvmCase) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	for _, g := range []string{throttled, goOwnLimit, podOnly, arenas, idle, service} {
		w("mkcg %s", g)
	}
	set := func(g, file, v string) { w("echo %q > $CG/%s/%s", v, g, file) }
	// Kubelet: pod limit = sum of the containers' limits; memory likewise.
	set(podA.slice, "cpu.max", "70000 100000")
	set(podA.slice, "memory.max", fmt.Sprint(384<<20))
	set(throttled, "cpu.max", "20000 100000")
	set(throttled, "memory.max", fmt.Sprint(128<<20))
	set(goOwnLimit, "cpu.max", "50000 100000")
	set(goOwnLimit, "memory.max", fmt.Sprint(256<<20))
	set(goOwnLimit, "memory.high", fmt.Sprint(192<<20)) // the kubelet's MemoryQoS sets it
	set(podB.slice, "cpu.max", "50000 100000")
	set(podB.slice, "memory.max", fmt.Sprint(256<<20))
	set(podC.slice, "cpu.max", "100000 100000")
	set(podC.slice, "memory.max", fmt.Sprint(512<<20))
	set(arenas, "cpu.max", "100000 100000")
	set(arenas, "memory.max", fmt.Sprint(512<<20))
	set(podD.slice, "cpu.weight", "1")
	set(idle, "cpu.weight", "1")
	set(batchSlice, "cpu.max", "30000 100000")

	burn := `sh -c 'while :; do :; done'`
	w("runin %s %s", throttled, burn)
	w("runin %s %s", throttled, burn)
	// 16 MiB of tmpfs pages charged to the throttled container (memory.stat shmem/file).
	w("runin %s dd if=/dev/zero of=/tmp/fill bs=1M count=16", throttled)
	w("runin %s sh -c '/bin/goprog > /tmp/go-own.out'", goOwnLimit)
	w("runin %s sh -c '/bin/goprog > /tmp/go-pod.out'", podOnly)
	w("runin %s %s", podOnly, burn)
	w("runin %s sh -c 'sleep 1000 | /bin/arenas 8 66 > /tmp/arenas.out'", arenas)
	w("runin %s sleep 1000", idle)
	w("runin %s %s", service, burn)
	jvmScenario(w, jvms)
	// Ready: both Go programs settled, the C program printed its arenas. Only then the exporter
	// starts: it keeps a process's malloc layout for 30 s, and a read while the C program was
	// still allocating would be compared with malloc_info's final numbers.
	w(`i=0; while [ $i -lt 240 ]; do
	grep -q settled /tmp/go-own.out 2>/dev/null && grep -q settled /tmp/go-pod.out 2>/dev/null &&
	grep -q READY /tmp/arenas.out 2>/dev/null%s && break
	i=$((i+1)); sleep 0.5; done`, jvmReadyCheck(jvms))
	w(startExporter)
	w(`j=0; while [ $j -lt 120 ] && ! wget -q -O /dev/null http://127.0.0.1:10137/metrics; do j=$((j+1)); sleep 0.5; done`)
	w("echo ready after $i polls, uptime $(cut -d' ' -f1 /proc/uptime)")
	w("sleep 4") // throttling accumulates
	w("for g in kubepods.slice %s; do echo 1 > $CG/$g/cgroup.freeze; done", batchSlice)
	w(`for g in kubepods.slice %s; do while ! grep -q 'frozen 1' $CG/$g/cgroup.events; do sleep 0.1; done; done`, batchSlice)
	w("sleep 0.5")
	list := strings.Join(append([]string{"."}, watchedCgroups()...), " ") // ".": the root, for the fixture
	w("echo frozen, uptime $(cut -d' ' -f1 /proc/uptime)")
	w("section files-before dumpcg %s", list)
	w("echo dumped, uptime $(cut -d' ' -f1 /proc/uptime)")
	// HELP texts are most of the exposition and the serial console is slow: leave them out.
	w("section scrape sh -c 'wget -q -O - http://127.0.0.1:10137/metrics | grep -v \"^# HELP\"'")
	w("echo scraped, uptime $(cut -d' ' -f1 /proc/uptime)")
	w("section files-after dumpcg %s", list)
	w("section arenas-maps cat /proc/$(pidof arenas)/maps")
	w("for g in kubepods.slice %s; do echo 0 > $CG/$g/cgroup.freeze; done", batchSlice)
	// The OOM kill: watched by the exporter first (a scrape), then killed; the cgroup is removed
	// 200 ms after the kill, a new container cgroup created, and the exporter scraped again.
	w("mkcg %s", oomed)
	set(podE.slice, "memory.max", fmt.Sprint(128<<20))
	set(oomed, "memory.max", fmt.Sprint(64<<20))
	w("runin %s sleep 1000", oomed)
	w("wget -q -O /dev/null http://127.0.0.1:10137/metrics")
	w("runin %s dd if=/dev/zero of=/dev/null bs=256M count=1", oomed) // fills a 256 MiB buffer
	w(`i=0; while ! grep -q 'oom_kill 1' $CG/%s/memory.events && [ $i -lt 600 ]; do i=$((i+1)); sleep 0.05; done`, oomed)
	w("sleep 0.2")
	w("echo 1 > $CG/%s/cgroup.kill; while [ -n \"$(cat $CG/%s/cgroup.procs)\" ]; do sleep 0.05; done; rmdir $CG/%s", oomed, oomed, oomed)
	w("mkcg %s", restarted)
	set(restarted, "memory.max", fmt.Sprint(64<<20))
	w("runin %s sleep 1000", restarted)
	w("sleep 1") // the exporter's discovery is shared for 500 ms: see the new container
	w("section oom-scrape sh -c 'wget -q -O - http://127.0.0.1:10137/metrics | grep oom_kills'")
	w("section oom-pod-events cat $CG/%s/memory.events", podE.slice)
	w("section oom-pod-events-local cat $CG/%s/memory.events.local", podE.slice)
	w("mkcg %s", lateOOM)
	set(lateOOM, "memory.max", fmt.Sprint(64<<20))
	w("runin %s sleep 1000", lateOOM)
	w("sleep 0.6; wget -q -O /dev/null http://127.0.0.1:10137/metrics") // watched from here on
	w("kill -STOP $(pidof quota_exporter)")
	w("runin %s dd if=/dev/zero of=/dev/null bs=256M count=1", lateOOM)
	w(`i=0; while ! grep -q 'oom_kill 1' $CG/%s/memory.events && [ $i -lt 600 ]; do i=$((i+1)); sleep 0.05; done`, lateOOM)
	w("echo 1 > $CG/%s/cgroup.kill; while [ -n \"$(cat $CG/%s/cgroup.procs)\" ]; do sleep 0.05; done; rmdir $CG/%s", lateOOM, lateOOM, lateOOM)
	w("kill -CONT $(pidof quota_exporter)")
	w("sleep 1")
	w("section oom-late-scrape sh -c 'wget -q -O - http://127.0.0.1:10137/metrics | grep oom_kills'")
	w("section oom-late-pod-events cat $CG/%s/memory.events", podE.slice)
	w("section oom-late-pod-events-local cat $CG/%s/memory.events.local", podE.slice)
	w("section go-own cat /tmp/go-own.out")
	w("section go-pod cat /tmp/go-pod.out")
	w("section arenas cat /tmp/arenas.out")
	jvmSections(w, jvms)
	w("section exporter-log cat /tmp/exporter.log")
	w("section nproc nproc")
	w("section mountinfo cat /proc/self/mountinfo")
	w("echo scenario done, uptime $(cut -d' ' -f1 /proc/uptime)")
	return b.String()
}

var (
	bootOnce sync.Once
	booted   *vm.Result
	bootErr  error
)

// boot runs the scenario VM once for all tests of the package.
func boot(t *testing.T) *vm.Result {
	t.Helper()
	host := vm.Find(t)
	for _, tool := range []string{"go", "gcc", "ldd", "javac"} {
		_, err := exec.LookPath(tool)
		vm.Require(t, err == nil, tool+" not found in PATH")
	}
	jdks := findJDKs()
	vm.Require(t, len(jdks) > 0, "no JDK with jlink (apt package openjdk-17-jdk-headless)")
	bootOnce.Do(func() {
		jvmCases = newJVMCases(jdks)
		booted, bootErr = bootScenario(host, jdks)
	})
	if bootErr != nil {
		console := ""
		if booted != nil {
			console = booted.Console
			if len(console) > 6000 {
				console = "..." + console[len(console)-6000:]
			}
		}
		t.Fatalf("v2 VM: %v\nconsole:\n%s", bootErr, console)
	}
	return booted
}

func bootScenario(host *vm.Host, jdks []jdk) (*vm.Result, error) {
	dir, err := os.MkdirTemp("", "quota-v2vm-")
	if err != nil {
		return nil, err
	}
	if os.Getenv("QUOTA_VM_DEBUG") != "1" {
		defer os.RemoveAll(dir)
	}
	root := testenv.RepoRoot()
	bins := filepath.Join(dir, "bins")
	if err := os.MkdirAll(bins, 0o755); err != nil {
		return nil, err
	}
	exporter := filepath.Join(bins, "quota_exporter")
	if err := run(root, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", exporter, "./exporter/cmd/quota_exporter"); err != nil {
		return nil, err
	}
	// The Go program with `go 1.26` in its go.mod: container-aware GOMAXPROCS (Go 1.25+).
	prog := filepath.Join(dir, "goprog")
	src, err := os.ReadFile(filepath.Join(root, "exporter", "internal", "goruntime", "testdata", "prog", "main.go"))
	if err != nil {
		return nil, err
	}
	_ = os.MkdirAll(prog, 0o755)
	_ = os.WriteFile(filepath.Join(prog, "main.go"), src, 0o644)
	_ = os.WriteFile(filepath.Join(prog, "go.mod"), []byte("module prog\n\ngo 1.26\n"), 0o644)
	if err := run(prog, []string{"CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod -buildvcs=false"}, "go", "build", "-o", filepath.Join(bins, "goprog"), "."); err != nil {
		return nil, err
	}
	// The C program, dynamically linked against glibc: the image gets its libraries.
	if err := run(dir, nil, "gcc", "-O1", "-pthread", "-o", filepath.Join(bins, "arenas"),
		filepath.Join(root, "exporter", "internal", "malloc", "testdata", "arenas.c")); err != nil {
		return nil, err
	}
	im, err := vm.NewImage(host, filepath.Join(dir, "image"))
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"quota_exporter", "goprog", "arenas"} {
		if err := im.AddBinary("/bin/"+b, filepath.Join(bins, b)); err != nil {
			return nil, err
		}
	}
	if err := addJVMs(im, dir, jdks); err != nil {
		return nil, err
	}
	// Idle, the VM runs for about 40 s; other work on this 2-core machine can slow software
	// emulation several times over.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	res, err := host.Run(ctx, im, scenario(jvmCases))
	if res != nil && os.Getenv("QUOTA_V2_CONSOLE") != "" {
		_ = os.WriteFile(os.Getenv("QUOTA_V2_CONSOLE"), []byte(res.Console), 0o644)
	}
	if res != nil {
		fmt.Fprintf(os.Stderr, "v2 VM: accel %s, %v from qemu start to power-off\n", res.Accel, res.Elapsed.Round(100*time.Millisecond))
	}
	return res, err
}

// imageWith is a VM image holding the named binaries of bins at /bin/<name>.
func imageWith(host *vm.Host, dir, bins string, names ...string) (*vm.Image, error) {
	im, err := vm.NewImage(host, filepath.Join(dir, "image"))
	if err != nil {
		return nil, err
	}
	for _, b := range names {
		if err := im.AddBinary("/bin/"+b, filepath.Join(bins, b)); err != nil {
			return nil, err
		}
	}
	return im, nil
}

func run(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
