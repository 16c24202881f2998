// Package vm boots a real cgroup v2 host for tests: Debian's cloud kernel under qemu with a
// busybox initramfs that holds the binaries a test adds, cgroup2 mounted on /sys/fs/cgroup
// with the cpu and memory controllers enabled (pressure is on by default), and a scenario
// shell script. The scenario prints marked sections on the serial console; Run returns them.
//
// This machine's own kernel mounts cpu and memory on cgroup v1, so every real v2 fact the
// exporter depends on is checked here. Prerequisites come from Debian (make deps-apt):
// qemu-system-x86, busybox-static, and the kernel package that linux-image-cloud-amd64
// depends on, unpacked with dpkg -x into KernelCacheDir.
package vm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// KernelCacheDir is where `make deps-apt` unpacks the kernel package (boot/vmlinuz-*).
// QUOTA_VM_KERNEL names a vmlinuz directly instead.
const KernelCacheDir = "/var/cache/quota_exporter/kernel/root"

// CPUs and MemoryMiB of every VM: 4 vCPUs so that container-aware runtimes have more CPUs
// than the small limits the scenarios set.
const (
	CPUs      = 4
	MemoryMiB = 1536
)

// Require is testenv.Require: skipped locally, failed on CI (run make deps-apt as root).
var Require = testenv.Require

// Host is what booting needs on this machine.
type Host struct {
	Qemu, Kernel, Busybox string
	Accel                 string // kvm or tcg, see accel
}

// Find locates qemu, the kernel and a static busybox, and decides kvm or tcg.
func Find(t testing.TB) *Host {
	t.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	Require(t, err == nil, "qemu-system-x86_64 not installed (apt package qemu-system-x86)")
	busybox := "/bin/busybox"
	out, _ := exec.Command("file", "-L", busybox).Output()
	Require(t, fileExists(busybox) && (len(out) == 0 || bytes.Contains(out, []byte("statically linked"))),
		"no static /bin/busybox (apt package busybox-static)")
	kernel := os.Getenv("QUOTA_VM_KERNEL")
	if kernel == "" {
		m, _ := filepath.Glob(filepath.Join(KernelCacheDir, "boot", "vmlinuz-*-cloud-amd64"))
		sort.Strings(m)
		if len(m) > 0 {
			kernel = m[len(m)-1]
		}
	}
	Require(t, kernel != "" && fileExists(kernel), "no Debian cloud kernel under "+KernelCacheDir+" (make deps-apt)")
	h := &Host{Qemu: qemu, Kernel: kernel, Busybox: busybox}
	h.Accel = h.accel(t)
	return h
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

var (
	accelOnce sync.Once
	accelName string
)

// accel returns kvm when a probe VM really boots with it, else tcg. On this machine /dev/kvm
// exists but a nested KVM guest hangs after "Booting from ROM", so the probe has a short
// deadline (a working KVM boots the probe in about a second, TCG in about ten); the answer
// is kept in a file next to the kernel so later runs do not pay for the probe again.
// QUOTA_VM_ACCEL=kvm|tcg skips the probe.
func (h *Host) accel(t testing.TB) string {
	if a := os.Getenv("QUOTA_VM_ACCEL"); a != "" {
		return a
	}
	accelOnce.Do(func() {
		accelName = "tcg"
		if _, err := os.Stat("/dev/kvm"); err != nil {
			return
		}
		key := sha256.Sum256([]byte(h.Qemu + "\x00" + h.Kernel + "\x00" + hostRelease()))
		memo := filepath.Join(os.TempDir(), fmt.Sprintf("quota_exporter-vm-accel-%x", key[:8]))
		if b, err := os.ReadFile(memo); err == nil {
			accelName = strings.TrimSpace(string(b))
			return
		}
		im, err := NewImage(h, t.TempDir())
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
			res, err := h.run(ctx, "kvm", im, "echo @@KVM-OK@@", 6*time.Second)
			cancel()
			if err == nil && strings.Contains(res.Console, "@@KVM-OK@@") {
				accelName = "kvm"
			}
		}
		_ = os.WriteFile(memo, []byte(accelName+"\n"), 0o644)
	})
	return accelName
}

func hostRelease() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

// Image is an initramfs being assembled in a directory.
type Image struct {
	dir string
}

// NewImage starts an initramfs in dir with busybox and the /init that mounts the pseudo
// file systems and cgroup2 and then runs /scenario.sh.
func NewImage(h *Host, dir string) (*Image, error) {
	im := &Image{dir: dir}
	for _, d := range []string{"bin", "sbin", "proc", "sys", "dev", "tmp", "run", "etc", "usr/bin", "usr/sbin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := im.AddFile("/bin/busybox", h.Busybox); err != nil {
		return nil, err
	}
	// A root entry, as container images have: HotSpot names its perf data directory
	// hsperfdata_<user> and keeps perf data in plain memory when the user has no name.
	if err := im.AddData("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644); err != nil {
		return nil, err
	}
	return im, im.AddData("/init", []byte(initScript), 0o755)
}

// initScript prepares the v2 host. Helpers for scenarios:
//
//	section NAME CMD...   runs CMD with its output, gzipped and base64-encoded (the emulated
//	                      serial port is the slowest part of a run), between @@BEGIN NAME@@
//	                      and @@END NAME@@
//	mkcg PATH             creates a cgroup and enables +cpu +memory in every ancestor's subtree_control
//	runin PATH CMD...     starts CMD in the background inside cgroup PATH, prints nothing
//	dumpcg PATH...        prints every readable regular file of each cgroup as "--- PATH/FILE" + content
const initScript = `#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
ip link set lo up
mount -t cgroup2 -o nsdelegate none /sys/fs/cgroup
echo "+cpu +memory" > /sys/fs/cgroup/cgroup.subtree_control
CG=/sys/fs/cgroup
section() { n=$1; shift; echo "@@BEGIN $n@@"; { "$@" 2>&1; echo "@@rc=$?"; } | gzip -1 | base64 -w 0; echo; echo "@@END $n@@"; }
mkcg() {
	p=""
	for c in $(echo "$1" | tr / ' '); do
		[ -e "$CG$p/$c" ] || { mkdir "$CG$p/$c" || return 1; }
		echo "+cpu +memory" > "$CG$p/cgroup.subtree_control" 2>/dev/null
		p="$p/$c"
	done
}
runin() { g=$1; shift; sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG/$g" "$@" & }
dumpcg() {
	for g in "$@"; do
		for f in "$CG/$g"/*; do
			[ -f "$f" ] && [ -r "$f" ] || continue
			case "${f##*/}" in cgroup.controllers|cgroup.procs|*.pressure|cpu.stat|cpu.max|cpu.max.burst|cpu.weight|cpuset.cpus.effective|memory.current|memory.max|memory.high|memory.peak|memory.stat|memory.events|memory.events.local) ;; *) continue ;; esac
			echo "--- $g/${f##*/}"; cat "$f" 2>&1
		done
	done
}
echo "@@BOOTED@@ cpus=$(nproc) kernel=$(uname -r) controllers=$(cat $CG/cgroup.subtree_control)"
. /scenario.sh
echo "@@DONE@@"
poweroff -f
`

// AddData writes a file into the image.
func (im *Image) AddData(dst string, data []byte, mode fs.FileMode) error {
	p := filepath.Join(im.dir, dst)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, mode)
}

// AddFile copies a file (following symlinks) into the image, keeping its mode.
func (im *Image) AddFile(dst, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return im.AddData(dst, b, st.Mode().Perm())
}

var lddPath = regexp.MustCompile(`(?m)(?:=>\s*)?(/\S+)\s+\(0x[0-9a-f]+\)`)

// AddBinary copies an executable and, when it is dynamically linked, the shared libraries
// ldd lists for it, at the same absolute paths (so the interpreter and rpath resolve).
func (im *Image) AddBinary(dst, src string) error {
	if err := im.AddFile(dst, src); err != nil {
		return err
	}
	out, err := exec.Command("ldd", src).CombinedOutput()
	if err != nil { // "not a dynamic executable": static, nothing more to copy
		return nil
	}
	for _, m := range lddPath.FindAllStringSubmatch(string(out), -1) {
		if err := im.AddFile(m[1], m[1]); err != nil {
			return fmt.Errorf("library of %s: %w", src, err)
		}
	}
	return nil
}

// AddTree copies the directory src to dst (a jlinked Java runtime), and the shared libraries
// that its ELF files link from outside src (ldd), at their absolute paths.
func (im *Image) AddTree(dst, src string) error {
	libs := map[string]bool{}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if err := im.AddFile(filepath.Join(dst, rel), p); err != nil {
			return err
		}
		if magic, _ := readMagic(p); magic != "\x7fELF" {
			return nil
		}
		out, err := exec.Command("ldd", p).CombinedOutput()
		if err != nil { // static, or not loadable here
			return nil
		}
		for _, m := range lddPath.FindAllStringSubmatch(string(out), -1) {
			if !strings.HasPrefix(m[1], src+"/") {
				libs[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for lib := range libs {
		if err := im.AddFile(lib, lib); err != nil {
			return fmt.Errorf("library of %s: %w", src, err)
		}
	}
	return nil
}

func readMagic(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, 4)
	n, _ := io.ReadFull(f, b)
	return string(b[:n]), nil
}

// Pack writes the image as an initramfs (a newc cpio archive) to out.
func (im *Image) Pack(h *Host, out string) error { return im.pack(h.Busybox, out) }

// pack writes the image as a newc cpio archive with busybox's own cpio (the machine has no
// cpio package). Uncompressed: qemu loads it as it is, and the guest kernel need not spend
// emulated CPU time inflating it.
func (im *Image) pack(busybox, out string) error {
	var list bytes.Buffer
	err := filepath.WalkDir(im.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(im.dir, p)
		list.WriteString(rel + "\n")
		return nil
	})
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(busybox, "cpio", "-o", "-H", "newc")
	cmd.Dir = im.dir
	cmd.Stdin = &list
	cmd.Stdout = f
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cpio: %v: %s", err, stderr.String())
	}
	return f.Close()
}

// Result is what a VM run printed.
type Result struct {
	Console  string        // the whole serial console
	Accel    string        // kvm or tcg
	Elapsed  time.Duration // from qemu start to its exit
	sections map[string][]string
}

// Sections returns the outputs of every section with this name, in order.
func (r *Result) Sections(name string) []string { return r.sections[name] }

// Section returns the only (or last) output of a section, or "" when it never ran.
func (r *Result) Section(name string) string {
	s := r.sections[name]
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// Done reports whether the scenario ran to its end.
func (r *Result) Done() bool { return strings.Contains(r.Console, "@@DONE@@") }

// Run packs the image with the scenario and boots it, returning what the console showed.
// ctx bounds the whole run; an error means qemu failed or the deadline passed, with the
// console so far in the Result.
func (h *Host) Run(ctx context.Context, im *Image, scenario string) (*Result, error) {
	deadline, ok := ctx.Deadline()
	limit := 4 * time.Minute
	if ok {
		limit = time.Until(deadline)
	}
	return h.run(ctx, h.Accel, im, scenario, limit)
}

func (h *Host) run(ctx context.Context, accel string, im *Image, scenario string, limit time.Duration) (*Result, error) {
	if err := im.AddData("/scenario.sh", []byte(scenario+"\n"), 0o755); err != nil {
		return nil, err
	}
	initrd := im.dir + ".cpio"
	if err := im.pack(h.Busybox, initrd); err != nil {
		return nil, err
	}
	defer os.Remove(initrd)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.Qemu,
		"-accel", accel, "-smp", fmt.Sprint(CPUs), "-m", fmt.Sprint(MemoryMiB),
		"-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio", "-no-reboot",
		"-kernel", h.Kernel, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 no_timer_check "+kernelLog())
	var console bytes.Buffer
	cmd.Stdout = &console
	cmd.Stderr = &console
	start := time.Now()
	err := cmd.Run()
	res := &Result{Console: strings.ReplaceAll(console.String(), "\r\n", "\n"), Accel: accel, Elapsed: time.Since(start)}
	res.sections = parseSections(res.Console)
	if ctx.Err() != nil {
		return res, fmt.Errorf("VM (%s) did not finish within %v: %w", accel, limit, ctx.Err())
	}
	if err != nil {
		return res, fmt.Errorf("qemu: %w", err)
	}
	if !res.Done() {
		return res, errors.New("the scenario did not reach its end (kernel panic or init died)")
	}
	return res, nil
}

// no_timer_check: under emulation on a busy host the kernel's IO-APIC timer check can fail
// and panic the boot ("IO-APIC + timer doesn't work!"), as it did here under load.
//
// kernelLog silences the kernel on the console, unless QUOTA_VM_DEBUG=1 (to see why a
// boot failed; kernel lines may then interleave with the sections).
func kernelLog() string {
	if os.Getenv("QUOTA_VM_DEBUG") == "1" {
		return "loglevel=7"
	}
	return "quiet loglevel=0"
}

// parseSections splits the console at @@BEGIN name@@ / @@END name@@ lines and decodes each
// section (base64 of gzip, ending with an "@@rc=N" line that is dropped). Kernel messages
// are silenced (loglevel=0); a section that does not decode is kept as its raw text.
func parseSections(console string) map[string][]string {
	out := map[string][]string{}
	var name string
	var buf strings.Builder
	in := false
	s := bufio.NewScanner(strings.NewReader(console))
	s.Buffer(make([]byte, 1<<20), 64<<20)
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "@@BEGIN ") && strings.HasSuffix(line, "@@"):
			name, in = strings.TrimSuffix(strings.TrimPrefix(line, "@@BEGIN "), "@@"), true
			buf.Reset()
		case in && line == "@@END "+name+"@@":
			out[name] = append(out[name], decodeSection(buf.String()))
			in = false
		case in:
			buf.WriteString(line)
		}
	}
	return out
}

func decodeSection(enc string) string {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return enc
	}
	z, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return enc
	}
	b, err := io.ReadAll(z)
	if err != nil {
		return enc
	}
	text := string(b)
	if i := strings.LastIndex(text, "@@rc="); i >= 0 {
		text = text[:i]
	}
	return text
}

// Files parses a dumpcg section into "cgroup/file" -> content.
func Files(section string) map[string]string {
	out := map[string]string{}
	var key string
	var buf strings.Builder
	flush := func() {
		if key != "" {
			out[key] = buf.String()
		}
		buf.Reset()
	}
	for _, line := range strings.SplitAfter(section, "\n") {
		if strings.HasPrefix(line, "--- ") {
			flush()
			key = strings.TrimSpace(strings.TrimPrefix(line, "--- "))
			continue
		}
		buf.WriteString(line)
	}
	flush()
	return out
}
