package v2

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// jdk is an installed JDK whose jlinked runtime runs in the VM.
type jdk struct {
	home, version string
	feature       int
}

// name is the JDK's directory in the image and its cases' file names.
func (j jdk) name() string { return fmt.Sprintf("jdk%d", j.feature) }

var releaseVersion = regexp.MustCompile(`(?m)^JAVA_VERSION="([^"]+)"`)

// findJDKs lists the JDKs of this machine, one per feature release: the one whose javac is
// on PATH (required: the project's JDK 17) and the others under /usr/lib/jvm (the machine
// image has a Temurin beside Debian's OpenJDK). Each needs jlink.
func findJDKs() []jdk {
	var homes []string
	if javac, err := exec.LookPath("javac"); err == nil {
		if real, err := filepath.EvalSymlinks(javac); err == nil {
			homes = append(homes, filepath.Dir(filepath.Dir(real)))
		}
	}
	more, _ := filepath.Glob("/usr/lib/jvm/*/bin/jlink")
	for _, m := range more {
		homes = append(homes, filepath.Dir(filepath.Dir(m)))
	}
	seen := map[int]bool{}
	var out []jdk
	for _, h := range homes {
		h, err := filepath.EvalSymlinks(h)
		if err != nil {
			continue
		}
		rel, err := os.ReadFile(filepath.Join(h, "release"))
		m := releaseVersion.FindSubmatch(rel)
		if err != nil || m == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(h, "bin", "jlink")); err != nil {
			continue
		}
		v := string(m[1])
		f, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
		if f < 11 || seen[f] {
			continue
		}
		seen[f] = true
		out = append(out, jdk{home: h, version: v, feature: f})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].feature < out[b].feature })
	return out
}

// jlinkArgs: java.base only (the probe needs nothing else), no debug symbols, with a CDS
// archive (class loading is the JVM's start-up cost, and software emulation multiplies it).
var jlinkArgs = []string{"--add-modules", "java.base", "--strip-debug", "--no-header-files", "--no-man-pages", "--generate-cds-archive"}

// jlinkRuntime builds (once per JDK build, cached in the temp dir across runs: jlink takes
// ~25 s here) a small runtime of j: about 45 MB, most of it libjvm.so and the CDS archive.
func jlinkRuntime(j jdk) (string, error) {
	rel, _ := os.ReadFile(filepath.Join(j.home, "release"))
	key := sha256.Sum256([]byte(j.home + "\x00" + string(rel) + "\x00" + strings.Join(jlinkArgs, " ")))
	dir := filepath.Join(os.TempDir(), "quota_exporter-jlink", fmt.Sprintf("%s-%x", j.version, key[:6]))
	if _, err := os.Stat(filepath.Join(dir, "bin", "java")); err == nil {
		return dir, nil
	}
	tmp := fmt.Sprintf("%s.tmp%d", dir, os.Getpid())
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	args := append(append([]string{}, jlinkArgs...), "--output", tmp)
	if j.feature >= 21 {
		args = append(args, "--compress=zip-6")
	} else {
		args = append(args, "--compress=2")
	}
	if err := run("", nil, filepath.Join(j.home, "bin", "jlink"), args...); err != nil {
		return "", err
	}
	// Compressed-oops-off archive: used only with heaps over 32 GiB, never here.
	_ = os.Remove(filepath.Join(tmp, "lib", "server", "classes_nocoops.jsa"))
	if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
		_ = os.RemoveAll(tmp)
		if _, statErr := os.Stat(filepath.Join(dir, "bin", "java")); statErr != nil {
			return "", err
		}
	}
	return dir, nil
}

// jvmCase is one JVM of the scenario: a JDK in a container with its own 2-core limit, or in
// a container whose pod alone has the 2-core limit.
type jvmCase struct {
	jdk    jdk
	podCPU bool // the limit is on the pod only
	cgroup string
}

func (c jvmCase) out() string {
	if c.podCPU {
		return c.jdk.name() + "-pod"
	}
	return c.jdk.name() + "-own"
}

var (
	// Pod F (burstable): a container per JDK, each with its own 2-core limit (the pod's is
	// their sum). Pod G: the 2-core limit on the pod only.
	podF = pod(burstable, "burstable", "0f0f0f0f-6666-4666-8666-00000000000f")
	podG = pod(burstable, "burstable", "10101010-7777-4777-8777-000000000010")
)

// jvmCases are the JVMs for the JDKs found, filled in by bootScenario.
var jvmCases []jvmCase

func newJVMCases(jdks []jdk) []jvmCase {
	var out []jvmCase
	for i, j := range jdks {
		out = append(out,
			jvmCase{jdk: j, cgroup: container(podF, hexID(byte('1'+i)))},
			jvmCase{jdk: j, podCPU: true, cgroup: container(podG, hexID(byte('5'+i)))})
	}
	return out
}

// jvmOptions: G1 explicitly (the VM's 1.5 GiB is below HotSpot's server-class threshold, so
// the default would be Serial, which has no GC threads to compare), a small heap.
const jvmOptions = "-XX:+UseG1GC -Xmx48m -Xshare:auto -XX:+UsePerfData -XX:+PrintFlagsFinal"

// jvmScenario creates the JVM cgroups and starts the JVMs.
func jvmScenario(w func(string, ...any), cases []jvmCase) {
	if len(cases) == 0 {
		return
	}
	set := func(g, file, v string) { w("echo %q > $CG/%s/%s", v, g, file) }
	own := 0
	for _, c := range cases {
		w("mkcg %s", c.cgroup)
		if !c.podCPU {
			set(c.cgroup, "cpu.max", "200000 100000")
			set(c.cgroup, "memory.max", fmt.Sprint(256<<20))
			own++
		}
	}
	set(podF.slice, "cpu.max", fmt.Sprintf("%d 100000", own*200000))
	set(podF.slice, "memory.max", fmt.Sprint(own*256<<20))
	set(podG.slice, "cpu.max", "200000 100000")
	set(podG.slice, "memory.max", fmt.Sprint(512<<20))
	// One at a time: a JVM starting while another cleans up /tmp/hsperfdata_root can find its
	// new file locked by that one and give up on it (JDK-8286030's flock protocol; seen in CI:
	// "Cannot use file ... locked by another process", the file left empty). The exporter's
	// handling of that is TestPerfDataFileLockedByAnother's; this test wants every JVM's data.
	for _, c := range cases {
		w("runin %s sh -c '/%s/bin/java %s -cp /probe JvmProbe > /tmp/jvm-%s.out 2>&1'", c.cgroup, c.jdk.name(), jvmOptions, c.out())
		w("i=0; while [ $i -lt 240 ] && ! grep -q READY /tmp/jvm-%s.out 2>/dev/null; do i=$((i+1)); sleep 0.25; done", c.out())
	}
}

// jvmReadyCheck is the shell condition "every JVM printed READY".
func jvmReadyCheck(cases []jvmCase) string {
	var b strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&b, " && grep -q READY /tmp/jvm-%s.out 2>/dev/null", c.out())
	}
	return b.String()
}

// jvmSections prints what each JVM said of itself.
func jvmSections(w func(string, ...any), cases []jvmCase) {
	for _, c := range cases {
		w(`section jvm-%s grep -E '^(cpus|version)=| (ParallelGCThreads|ConcGCThreads|CICompilerCount|ActiveProcessorCount|UseG1GC|UseContainerSupport) |^Error|Exception|\[(warning|error)\]' /tmp/jvm-%s.out`, c.out(), c.out())
	}
}

// addJVMs puts the jlinked runtimes and the compiled probe into the image.
func addJVMs(im interface {
	AddTree(dst, src string) error
	AddFile(dst, src string) error
}, dir string, jdks []jdk) error {
	if len(jdks) == 0 {
		return nil
	}
	classes := filepath.Join(dir, "probe")
	if err := run(dir, nil, filepath.Join(jdks[0].home, "bin", "javac"), "--release", "11", "-d", classes,
		filepath.Join(testenv.RepoRoot(), "test", "v2", "testdata", "JvmProbe.java")); err != nil {
		return err
	}
	if err := im.AddFile("/probe/JvmProbe.class", filepath.Join(classes, "JvmProbe.class")); err != nil {
		return err
	}
	for _, j := range jdks {
		rt, err := jlinkRuntime(j)
		if err != nil {
			return fmt.Errorf("jlink %s: %w", j.version, err)
		}
		if err := im.AddTree("/"+j.name(), rt); err != nil {
			return err
		}
	}
	return nil
}

var flagLine = regexp.MustCompile(`(?m)^\s*\S+\s+(\w+)\s+:?=\s+(\S+)`)

// printed parses a JVM's section: its cpus= line and its PrintFlagsFinal values.
func printed(section string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && (k == "cpus" || k == "version") {
			out[k] = strings.TrimSpace(v)
		}
	}
	for _, m := range flagLine.FindAllStringSubmatch(section, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// A real JVM of each installed JDK in a 2-core v2 container, and in a container whose pod
// alone has the 2-core limit: the exporter's CPU count and GC/JIT thread counts equal what
// the JVM says of itself (availableProcessors, -XX:+PrintFlagsFinal).
func TestJVMInVM(t *testing.T) {
	r := load(t)
	vm2 := strings.TrimSpace(r.res.Section("nproc"))
	if len(jvmCases) == 0 {
		t.Fatal("no JDK with jlink found")
	}
	for _, c := range jvmCases {
		p := printed(r.res.Section("jvm-" + c.out()))
		if p["cpus"] == "" {
			t.Errorf("%s: the JVM printed no cpus= line: %q", c.out(), r.res.Section("jvm-"+c.out()))
			continue
		}
		where := "own 2-core limit"
		want := "2"
		if c.podCPU {
			where = "2-core limit on the pod only"
			// JDK-8322420 (JDK 24): the JVM walks up to the ancestors' limits; before, it
			// reads its own cgroup only and sees the VM's CPUs.
			if c.jdk.feature < 24 {
				want = vm2
			}
		}
		for _, m := range []struct{ metric, printed string }{
			{"quota_jvm_cpu_count", "cpus"},
			{"quota_jvm_gc_parallel_threads", "ParallelGCThreads"},
			{"quota_jvm_gc_concurrent_threads", "ConcGCThreads"},
			{"quota_jvm_jit_threads", "CICompilerCount"},
		} {
			got, ok := r.scrape.value(m.metric, c.cgroup)
			if !ok || strconv.FormatFloat(got, 'f', -1, 64) != p[m.printed] {
				t.Errorf("JDK %s, %s: %s = %v (present %v), the JVM says %s = %q", p["version"], where, m.metric, got, ok, m.printed, p[m.printed])
			}
		}
		if v, _ := r.scrape.value("quota_jvm_perfdata_available", c.cgroup); v != 1 {
			t.Errorf("JDK %s, %s: perf data not read; the JVM said:\n%s\nexporter log:\n%s",
				p["version"], where, r.res.Section("jvm-"+c.out()), r.res.Section("exporter-log"))
		}
		t.Logf("JDK %s, %s: the JVM sees %s CPUs (ParallelGCThreads %s, ConcGCThreads %s, CICompilerCount %s); VM CPUs %s",
			p["version"], where, p["cpus"], p["ParallelGCThreads"], p["ConcGCThreads"], p["CICompilerCount"], vm2)
		if p["cpus"] != want {
			t.Errorf("JDK %s, %s: the JVM sees %s CPUs, the rules for this version expect %s", p["version"], where, p["cpus"], want)
		}
	}
}
