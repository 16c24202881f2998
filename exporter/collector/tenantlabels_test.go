package collector

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"

	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// buildGoProg builds internal/goruntime/testdata/prog (prints its GOMAXPROCS, then blocks).
func buildGoProg(t *testing.T) string {
	t.Helper()
	return testutil.BuildGo(t, filepath.Join("..", "internal", "goruntime", "testdata", "prog"))
}

// buildInfoMagic starts a Go executable's build info (debug/buildinfo).
const buildInfoMagic = "\xff Go buildinf:"

// patchGoVersion copies a binary to bin with the Go version in its build info overwritten
// with v of the same length.
func patchGoVersion(t *testing.T, from, bin, v string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(buildInfoMagic))
	if i < 0 || b[i+15]&2 == 0 {
		t.Fatalf("no inline build info in %s", bin)
	}
	n, w := binary.Uvarint(b[i+32:])
	if int(n) != len(v) {
		t.Fatalf("version is %d bytes, patch has %d", n, len(v))
	}
	copy(b[i+32+w:], v)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// buildFakeGo builds a C program whose .go.buildinfo section holds a build info with Go
// version v of any length: what a tenant can ship to look like Go.
func buildFakeGo(t *testing.T, dir, v string) string {
	t.Helper()
	blob := append([]byte(buildInfoMagic), 8, 2) // pointer size, inline strings
	blob = append(blob, make([]byte, 32-len(blob))...)
	blob = binary.AppendUvarint(blob, uint64(len(v)))
	blob = append(blob, v...)
	blob = binary.AppendUvarint(blob, 0) // no module info
	// debug/buildinfo reads a whole varint's worth of bytes: data follows in a real binary.
	blob = append(blob, make([]byte, 32)...)
	if err := os.WriteFile(filepath.Join(dir, "buildinfo.bin"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	src := `#include <unistd.h>
__asm__(".section .go.buildinfo,\"aw\"\n.balign 16\n.incbin \"` + filepath.Join(dir, "buildinfo.bin") + `\"\n.previous");
int main(void) { for (;;) pause(); }
`
	if err := os.WriteFile(filepath.Join(dir, "fake.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return testutil.BuildC(t, filepath.Join(dir, "fake.c"), "-O2")
}

// hostile is a name made of what a tenant can put in one: a terminal escape (clear screen,
// set title), BEL, CR/LF that would forge a line, DEL, a C1 control, a right-to-left
// override, and invalid UTF-8.
const hostile = "\x1b[2J\x1b]0;pwned\x07ok\r\nALERTS{}\x7f\u0085\u202eevil\xff\xfe"

// checkLabels fails for any label value of the cgroup's series that breaks the rule.
func checkLabels(t *testing.T, mfs map[string]*dto.MetricFamily, cgroup string) int {
	t.Helper()
	n := 0
	for name, mf := range mfs {
		for _, m := range cgroupSeries(mf, cgroup) {
			for _, lp := range m.Label {
				v := lp.GetValue()
				n++
				if len(v) > tenantstr.MaxLabel || !utf8.ValidString(v) || strings.IndexFunc(v, func(r rune) bool {
					return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
				}) >= 0 {
					t.Errorf("%s{%s=%q}: breaks the label rule (%d bytes)", name, lp.GetName(), v[:min(len(v), 80)], len(v))
				}
			}
		}
	}
	return n
}

// TestTenantStringsInLabels: real processes whose names, Go versions and JVM main jar are
// made of control characters and invalid UTF-8, and one whose Go version is about 1 KiB (four
// times the label cap; goruntime's reader refuses versions over 1 KiB before any label:
// TestReadGoBuildInfoBoundedOnCraftedBinaries), are exported with every label value cleaned by
// the one rule (tenantstr.Label) and capped.
func TestTenantStringsInLabels(t *testing.T) {
	cg := testutil.NewCgroup(t, "tenantlabels", testutil.CgroupOptions{QuotaUS: 50000, PeriodUS: 100000})
	dir := t.TempDir()
	prog := buildGoProg(t)
	craftedVersion := "go\x1b[31m\x07\x00\xff" // as long as the real "go1.26.x"
	named := filepath.Join(dir, hostile)
	patchGoVersion(t, prog, named, craftedVersion[:len(strings.TrimSpace(goVersionOf(t, prog)))])
	longVersion := "go1.26" + strings.Repeat("\x1b[31mA", 165) // 996 bytes
	longName := filepath.Join(dir, strings.Repeat("\u202e\x1b", 255/5))
	testutil.CopyFile(t, buildFakeGo(t, dir, longVersion), longName, 0o755)
	for _, bin := range []string{named, longName} {
		cmd := cg.Command(bin)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	jvm := ""
	if java, err := exec.LookPath("java"); err == nil {
		jvm = startHostileJVM(t, cg, java, dir)
	} else {
		testutil.Require(t, false, "no java: the JVM main jar case is skipped")
	}
	time.Sleep(500 * time.Millisecond)
	env := runtimeEnv(t)
	cs := allRuntimeCollectors(t, env)
	var mfs map[string]*dto.MetricFamily
	deadline := time.Now().Add(30 * time.Second)
	for {
		env.Cgroups.MaxAge, env.Processes.MaxAge = 0, 0
		mfs = scrapeFamilies(t, env, cs)
		if goInfos(mfs, cg.Path) >= 2 && (jvm == "" || seriesFor(mfs, "quota_jvm_info", cg.Path, "process", tenantstr.Label(jvm)) != nil) {
			break
		}
		if time.Now().After(deadline) {
			for _, n := range []string{"quota_go_info", "quota_process_info"} {
				for _, m := range cgroupSeries(mfs[n], cg.Path) {
					t.Logf("%s %v", n, m.Label)
				}
			}
			t.Fatalf("after 30s: %d quota_go_info series, JVM %q seen: %v", goInfos(mfs, cg.Path), jvm, seriesFor(mfs, "quota_jvm_info", cg.Path) != nil)
		}
		time.Sleep(300 * time.Millisecond)
	}
	n := checkLabels(t, mfs, cg.Path)
	t.Logf("%d label values of the tenant's series checked", n)
	comm := filepath.Base(named)[:15] // the kernel keeps 15 bytes of the name
	if seriesFor(mfs, "quota_go_info", cg.Path, "version", tenantstr.Label(craftedVersion[:8]), "process", tenantstr.Label(comm)) == nil {
		t.Errorf("no quota_go_info{version=%q, process=%q}", tenantstr.Label(craftedVersion[:8]), tenantstr.Label(comm))
	}
	long := seriesFor(mfs, "quota_go_info", cg.Path, "version", tenantstr.Label(longVersion))
	if long == nil {
		t.Errorf("no quota_go_info with the long version capped to %q", tenantstr.Label(longVersion))
	}
}

func goInfos(mfs map[string]*dto.MetricFamily, cgroup string) int {
	return len(cgroupSeries(mfs["quota_go_info"], cgroup))
}

// cgroupSeries are the series of mf (nil: none) with the cgroup label.
func cgroupSeries(mf *dto.MetricFamily, cgroup string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range mf.GetMetric() {
		for _, lp := range m.Label {
			if lp.GetName() == "cgroup" && lp.GetValue() == cgroup {
				out = append(out, m)
			}
		}
	}
	return out
}

// goVersionOf is the version the toolchain wrote into bin.
func goVersionOf(t *testing.T, bin string) string {
	out, err := exec.Command("go", "version", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	return f[len(f)-1]
}

// startHostileJVM runs a JVM from a jar whose file name is hostile: the process label of a
// JVM is its main jar's base name (perf data's sun.rt.javaCommand). It returns that name.
func startHostileJVM(t *testing.T, cg *testutil.Cgroup, java, dir string) string {
	t.Helper()
	javac, jar := testutil.LookPath(t, "javac"), testutil.LookPath(t, "jar")
	classes := filepath.Join(dir, "classes")
	if out, err := exec.Command(javac, "-d", classes, filepath.Join("..", "internal", "jvm", "testdata", "QuotaBusy.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	name := "j" + strings.ReplaceAll(hostile, "\xff\xfe", "") // a file name the jar tool accepts
	jarPath := filepath.Join(dir, name+".jar")
	if out, err := exec.Command(jar, "--create", "--file", jarPath, "--main-class", "QuotaBusy", "-C", classes, ".").CombinedOutput(); err != nil {
		t.Fatalf("jar: %v\n%s", err, out)
	}
	cmd := cg.Command(java, "-Xmx64m", "-jar", jarPath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return name
}
