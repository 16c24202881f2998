package node

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/quota-exporter/quota_exporter/test/v2/vm"
)

// VMRootCache keeps the VM node's root filesystems, one directory per recipe (packages, units,
// kernel): building one downloads about 150 Debian packages (minutes), booting it takes seconds.
const VMRootCache = "/var/cache/quota_exporter/kubenode-vmroot"

// The VM's Debian: the release this host runs (the kubelet, built here with cgo, links this
// glibc) and the packages of a systemd node: systemd as PID 1 with D-Bus (the kubelet's and
// the runtimes' systemd drivers talk to it), containerd, runc and crun, the CNI plugins, and
// the tools the harness runs there.
const (
	vmSuite  = "bookworm"
	vmMirror = "http://deb.debian.org/debian"
)

var vmPackages = []string{"systemd", "systemd-sysv", "dbus", "containerd", "runc", "crun", "containernetworking-plugins", "iproute2", "kmod", "procps"}

// vmUnits are files the recipe adds to the root. kubenode-data mounts the run's data disk
// (read-only; the harness writes it before the boot) and runs its init.sh, which sets up the
// network and starts the agent; the harness does the rest through the agent. There is no udev
// (nothing waits for device units) and the kernel modules the node needs are listed for
// systemd-modules-load; the journal stays in memory.
var vmFiles = map[string]string{
	"etc/systemd/system/kubenode-data.service": `[Unit]
Description=The kubenode run's data disk and init script
After=local-fs.target dbus.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'mkdir -p /data && mount -o ro /dev/vdb /data && exec /bin/sh -x /data/init.sh'
StandardOutput=journal+console
[Install]
WantedBy=multi-user.target
`,
	"etc/modules-load.d/kubenode.conf":          "overlay\nbr_netfilter\nbridge\nveth\n",
	"etc/systemd/journald.conf.d/kubenode.conf": "[Journal]\nStorage=volatile\n",
	"etc/hostname":                            "kubenode-vm\n",
	"etc/hosts":                               "127.0.0.1 localhost kubenode-vm\n",
	"etc/systemd/system/kubelet.slice":        kindKubeletSlice,
	"etc/systemd/system.conf.d/kubenode.conf": "[Manager]\nDefaultTimeoutStartSec=5min\n",
	"etc/sysctl.d/90-kubenode.conf":           "net.ipv4.ip_forward=1\n",
}

// kindKubeletSlice is kind's kubelet.slice (images/base/files/etc/systemd/system/kubelet.slice):
// kind runs the kubelet in it and sets cgroupRoot /kubelet, which must exist.
const kindKubeletSlice = `[Unit]
Description=slice used to run Kubernetes / Kubelet
Before=slices.target
[Slice]
MemoryAccounting=true
CPUAccounting=true
`

// vmMasked are units that cost boot time under emulation and do nothing for a test node (no
// udev, no logins, no timers, no persistent journal, no hardware).
var vmMasked = []string{
	"systemd-random-seed.service", "modprobe@dm_mod.service", "modprobe@drm.service", "modprobe@loop.service",
	"modprobe@fuse.service", "modprobe@configfs.service", "sys-kernel-config.mount", "sys-fs-fuse-connections.mount",
	"sys-kernel-debug.mount", "sys-kernel-tracing.mount", "dev-hugepages.mount", "dev-mqueue.mount",
	"systemd-sysusers.service", "systemd-update-utmp.service", "systemd-update-utmp-runlevel.service",
	"systemd-journal-flush.service", "systemd-binfmt.service", "proc-sys-fs-binfmt_misc.automount",
	"systemd-pstore.service", "systemd-repart.service", "systemd-firstboot.service", "systemd-hwdb-update.service",
	"ldconfig.service", "systemd-logind.service", "getty.target", "systemd-ask-password-console.path",
	"systemd-ask-password-wall.path", "systemd-tmpfiles-clean.timer", "e2scrub_reap.service",
	"systemd-user-sessions.service", "kmod-static-nodes.service", "apt-daily.timer", "apt-daily-upgrade.timer",
	"fstrim.timer", "e2scrub_all.timer", "dpkg-db-backup.timer",
}

// vmUnwanted are what the packages enable at boot that the harness starts itself, or nothing needs.
var vmUnwanted = []string{
	"etc/systemd/system/multi-user.target.wants/containerd.service",
	"etc/systemd/system/multi-user.target.wants/e2scrub_reap.service",
	"etc/systemd/system/getty.target.wants/getty@tty1.service",
}

// vmBootModules are loaded by the initramfs (with their dependencies): the root and data
// disks, the network and the entropy source are virtio devices, and the cloud kernel builds
// their drivers as modules.
var vmBootModules = []string{"virtio_pci", "virtio_blk", "virtio_net", "virtio-rng"}

// vmInit mounts the root disk read-write (qemu's snapshot=on keeps the cached image as it is)
// and hands over to systemd.
const vmInit = `#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /modules/order); do insmod /modules/$m.ko || echo "insmod $m failed"; done
i=0; while [ ! -b /dev/vda ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
mkdir -p /newroot
mount -t ext4 /dev/vda /newroot || { echo "@@NOROOT@@"; poweroff -f; }
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
`

// VMRoot is a bootable root filesystem for the VM node.
type VMRoot struct {
	Dir    string
	Image  string // ext4, booted with qemu's snapshot=on: never written
	Initrd string // loads the virtio drivers and switches to Image
	Kernel string
	// Versions are the installed packages' versions (dpkg-query), for the record.
	Versions map[string]string
}

// BuildVMRoot returns the cached root for this recipe, the extra packages (CRIOPackages for a
// CRI-O node) and kernel, building it when missing: mmdebstrap (Debian's packages, as root),
// the recipe's files, the kernel's modules with depmod, then an ext4 image made without
// mounting (mke2fs -d) and the initramfs.
func BuildVMRoot(ctx context.Context, h *vm.Host, extra []string, logf func(string, ...any)) (*VMRoot, error) {
	kver, modules, err := kernelModules(h.Kernel)
	if err != nil {
		return nil, err
	}
	packages := append(slices.Clone(vmPackages), extra...)
	dir := filepath.Join(VMRootCache, vmRecipeKey(kver, packages))
	r := &VMRoot{Dir: dir, Image: filepath.Join(dir, "root.img"), Initrd: filepath.Join(dir, initrdName(h)), Kernel: h.Kernel}
	if err := os.MkdirAll(VMRootCache, 0o755); err != nil {
		return nil, err
	}
	// One build at a time (two test binaries may want the same root).
	lock, err := os.OpenFile(filepath.Join(VMRootCache, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "versions.txt")); err == nil {
		if _, err := os.Stat(r.Initrd); err != nil {
			if err := buildInitrd(h, modules, filepath.Join(dir, "modules.dep"), r.Initrd); err != nil {
				return nil, err
			}
		}
		return r, r.readVersions()
	}
	start := time.Now()
	tmp := fmt.Sprintf("%s.tmp%d", dir, os.Getpid())
	os.RemoveAll(tmp)
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "tree")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	if logf != nil {
		logf("building the VM node's root (mmdebstrap %s: %s) into %s: minutes, once per recipe", vmSuite, strings.Join(packages, ", "), dir)
	}
	args := []string{"--mode=root", "--variant=minbase", "--include=" + strings.Join(packages, ","),
		"--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
		"--aptopt=Acquire::Retries \"3\"", vmSuite, tree, "deb " + vmMirror + " " + vmSuite + " main"}
	if out, err := run(ctx, 30*time.Minute, nil, "mmdebstrap", args...); err != nil {
		return nil, fmt.Errorf("mmdebstrap: %w\n%s", err, out)
	}
	t1 := time.Now()
	if err := customizeRoot(ctx, tree, kver, modules); err != nil {
		return nil, err
	}
	versions, err := run(ctx, time.Minute, nil, "chroot", tree, "dpkg-query", "-W", "-f", "${Package} ${Version}\n")
	if err != nil {
		return nil, err
	}
	img := filepath.Join(tmp, "root.img")
	if _, err := run(ctx, 10*time.Minute, nil, "mke2fs", "-q", "-t", "ext4", "-d", tree, "-L", "kubenode-root", "-F", img, "3G"); err != nil {
		return nil, err
	}
	// depmod's modules.dep of the tree, for the initramfs.
	if err := linkOrCopy(filepath.Join(tree, "usr", "lib", "modules", kver, "modules.dep"), filepath.Join(tmp, "modules.dep")); err != nil {
		return nil, err
	}
	if err := buildInitrd(h, modules, filepath.Join(tmp, "modules.dep"), filepath.Join(tmp, initrdName(h))); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "versions.txt"), []byte(versions), 0o644); err != nil {
		return nil, err
	}
	os.RemoveAll(tree)
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	if logf != nil {
		logf("built the VM root in %s (mmdebstrap %s, the rest %s)", time.Since(start).Round(time.Second), t1.Sub(start).Round(time.Second), time.Since(t1).Round(time.Second))
	}
	return r, r.readVersions()
}

func (r *VMRoot) readVersions() error {
	b, err := os.ReadFile(filepath.Join(r.Dir, "versions.txt"))
	if err != nil {
		return err
	}
	r.Versions = map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			r.Versions[f[0]] = f[1]
		}
	}
	return nil
}

// vmRecipeKey names a root by everything that goes into it.
func vmRecipeKey(kver string, packages []string) string {
	s := sha256.New()
	fmt.Fprintln(s, vmSuite, vmMirror, strings.Join(packages, ","), kver)
	fmt.Fprintln(s, strings.Join(vmMasked, ","), strings.Join(vmUnwanted, ","))
	names := make([]string, 0, len(vmFiles))
	for n := range vmFiles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintln(s, n, vmFiles[n])
	}
	return fmt.Sprintf("%s-%x", vmSuite, s.Sum(nil)[:6])
}

// initrdName names an initramfs by what goes into it (seconds to build, unlike the root).
func initrdName(h *vm.Host) string {
	s := sha256.New()
	fmt.Fprintln(s, vmInit, strings.Join(vmBootModules, ","))
	if st, err := os.Stat(h.Busybox); err == nil {
		fmt.Fprintln(s, st.Size())
	}
	return fmt.Sprintf("initrd-%x.cpio", s.Sum(nil)[:6])
}

// kernelModules finds the kernel's version and module directory: the package that `make
// deps-apt` unpacks has boot/vmlinuz-<version> and lib/modules/<version>.
func kernelModules(kernel string) (version, dir string, err error) {
	version = strings.TrimPrefix(filepath.Base(kernel), "vmlinuz-")
	dir = filepath.Join(filepath.Dir(filepath.Dir(kernel)), "lib", "modules", version)
	if _, err := os.Stat(filepath.Join(dir, "modules.order")); err != nil {
		return "", "", fmt.Errorf("no modules of kernel %s: %w", kernel, err)
	}
	return version, dir, nil
}

// customizeRoot adds the recipe's files, masks and unwanted links, and the kernel's modules.
func customizeRoot(ctx context.Context, tree, kver, modules string) error {
	for name, content := range vmFiles {
		p := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	for _, u := range vmUnwanted {
		os.Remove(filepath.Join(tree, u))
	}
	links := map[string]string{
		"etc/systemd/system/multi-user.target.wants/kubenode-data.service": "/etc/systemd/system/kubenode-data.service",
		"etc/systemd/system/default.target":                                "/lib/systemd/system/multi-user.target",
	}
	for _, u := range vmMasked {
		links["etc/systemd/system/"+u] = "/dev/null"
	}
	// Generators (fstab, getty, gpt-auto, ...) only find nothing here, slowly under emulation.
	gens, _ := os.ReadDir(filepath.Join(tree, "lib", "systemd", "system-generators"))
	for _, g := range gens {
		links["etc/systemd/system-generators/"+g.Name()] = "/dev/null"
	}
	for l, target := range links {
		p := filepath.Join(tree, l)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return err
		}
	}
	dst := filepath.Join(tree, "usr", "lib", "modules")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if _, err := run(ctx, 5*time.Minute, nil, "cp", "-a", modules, dst+"/"); err != nil {
		return err
	}
	_, err := run(ctx, 5*time.Minute, nil, "chroot", tree, "depmod", "-a", kver)
	return err
}

// buildInitrd packs busybox, vmInit and the boot modules of the kernel's module directory
// (dependencies first, from depmod's modules.dep) into an initramfs.
func buildInitrd(h *vm.Host, modules, modulesDep, out string) error {
	deps, err := moduleDeps(modulesDep)
	if err != nil {
		return err
	}
	dir := out + ".d"
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	im, err := vm.NewImage(h, dir)
	if err != nil {
		return err
	}
	var order []string
	seen := map[string]bool{}
	var add func(rel string)
	add = func(rel string) {
		if seen[rel] {
			return
		}
		seen[rel] = true
		for _, d := range deps[rel] {
			add(d)
		}
		order = append(order, strings.TrimSuffix(filepath.Base(rel), ".ko"))
	}
	for _, m := range vmBootModules {
		rel := ""
		for r := range deps {
			if filepath.Base(r) == m+".ko" {
				rel = r
			}
		}
		if rel == "" {
			return fmt.Errorf("module %s not in %s", m, modules)
		}
		add(rel)
	}
	for rel := range seen {
		if err := im.AddFile("/modules/"+filepath.Base(rel), filepath.Join(modules, rel)); err != nil {
			return err
		}
	}
	if err := im.AddData("/modules/order", []byte(strings.Join(order, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	if err := im.AddData("/init", []byte(vmInit), 0o755); err != nil {
		return err
	}
	return im.Pack(h, out)
}

// moduleDeps reads modules.dep: module -> the modules it needs.
func moduleDeps(file string) (map[string][]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deps := map[string][]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		mod, rest, ok := strings.Cut(s.Text(), ":")
		if ok {
			deps[mod] = strings.Fields(rest)
		}
	}
	return deps, s.Err()
}
