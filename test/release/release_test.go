// Package release checks what `make release` publishes (docs/release.md): the image tarball
// of each architecture (config, labels, the binary inside), the archives and the checksums.
// `make test-release` builds the artefacts into bin/release and points QUOTA_RELEASE_DIR at
// them; without it the test runs `make release` into a temporary directory itself.
package release

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// arches are the released architectures and their ELF machines.
var arches = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

const (
	repository = "ghcr.io/quota-exporter/quota-exporter"
	entrypoint = "/bin/quota_exporter"
	user       = "65534:65534"
	port       = "10137/tcp"
	versionPkg = "github.com/prometheus/common/version"
)

var (
	root       = testenv.RepoRoot()
	releaseDir string // set by TestMain
)

func TestMain(m *testing.M) {
	releaseDir = os.Getenv("QUOTA_RELEASE_DIR")
	if releaseDir == "" {
		tmp, err := os.MkdirTemp("", "quota-release-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cmd := exec.Command("make", "-C", root, "release", "RELEASE_DIR="+tmp)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "make release:", err)
			os.RemoveAll(tmp)
			os.Exit(1)
		}
		releaseDir = tmp
		code := m.Run()
		os.RemoveAll(tmp)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func version(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// git returns the output of a git command in the repository; the test needs the checkout's
// history, as make release does.
func git(t *testing.T, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	testenv.Require(t, err == nil, fmt.Sprintf("git %v: %v (the release is stamped from the checkout)", args, err))
	return strings.TrimSpace(string(out))
}

// TestImages: each architecture's image tarball, under both of its references.
func TestImages(t *testing.T) {
	v := version(t)
	commit, short := git(t, "rev-parse", "HEAD"), git(t, "rev-parse", "--short", "HEAD")
	for arch, machine := range arches {
		t.Run(arch, func(t *testing.T) {
			path := filepath.Join(releaseDir, "quota-exporter-image-linux-"+arch+".tar")
			var digests []string
			for _, ref := range []string{repository + ":" + v, "quota-exporter:" + v} {
				tag, err := name.NewTag(ref)
				if err != nil {
					t.Fatal(err)
				}
				img, err := tarball.ImageFromPath(path, &tag)
				if err != nil {
					t.Fatalf("%s in %s: %v", ref, path, err)
				}
				d, err := img.ConfigName()
				if err != nil {
					t.Fatal(err)
				}
				digests = append(digests, d.String())
			}
			if digests[0] != digests[1] {
				t.Errorf("the two references name different images: %v", digests)
			}
			tag, _ := name.NewTag(repository + ":" + v)
			img, err := tarball.ImageFromPath(path, &tag)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			wantVariant := map[string]string{"arm64": "v8"}[arch]
			if cf.OS != "linux" || cf.Architecture != arch || cf.Variant != wantVariant {
				t.Errorf("platform %s/%s/%s, want linux/%s/%s", cf.OS, cf.Architecture, cf.Variant, arch, wantVariant)
			}
			c := cf.Config
			if !slices.Equal(c.Entrypoint, []string{entrypoint}) || len(c.Cmd) != 0 {
				t.Errorf("entrypoint %q cmd %q, want [%s] and none", c.Entrypoint, c.Cmd, entrypoint)
			}
			if c.User != user {
				t.Errorf("user %q, want %q (non-root by default)", c.User, user)
			}
			if _, ok := c.ExposedPorts[port]; !ok || len(c.ExposedPorts) != 1 {
				t.Errorf("exposed ports %v, want %s", c.ExposedPorts, port)
			}
			created := c.Labels["org.opencontainers.image.created"]
			if ts, err := time.Parse(time.RFC3339, created); err != nil || !ts.Equal(cf.Created.Time) {
				t.Errorf("created label %q (%v), config created %v", created, err, cf.Created.Time)
			}
			for k, want := range map[string]string{
				"org.opencontainers.image.title":    "quota_exporter",
				"org.opencontainers.image.version":  v,
				"org.opencontainers.image.revision": commit,
				"org.opencontainers.image.licenses": "Apache-2.0",
				"org.opencontainers.image.source":   "https://github.com/quota-exporter/quota_exporter",
			} {
				if got := c.Labels[k]; got != want {
					t.Errorf("label %s = %q, want %q", k, got, want)
				}
			}
			for _, k := range []string{"description", "url", "documentation"} {
				if c.Labels["org.opencontainers.image."+k] == "" {
					t.Errorf("label org.opencontainers.image.%s missing", k)
				}
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("%d layers (%v), want the binary's only", len(layers), err)
			}
			bin := binaryIn(t, img)
			checkBinary(t, bin, arch, machine, short)
			if host, err := os.ReadFile(filepath.Join(releaseDir, "linux-"+arch, "quota_exporter")); err != nil || !bytes.Equal(host, bin) {
				t.Errorf("the image's binary differs from linux-%s/quota_exporter (%v)", arch, err)
			}
			if arch == runtime.GOARCH {
				runVersion(t, bin, v, short, buildDate(t))
			}
		})
	}
}

// binaryIn returns the entrypoint's file from the image's filesystem, checking that it is
// a root-owned executable.
func binaryIn(t *testing.T, img v1.Image) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if "/"+strings.TrimPrefix(h.Name, "./") != entrypoint {
			continue
		}
		if h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: type %c mode %o owner %d:%d, want a root-owned executable", h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("no %s in the image", entrypoint)
	return nil
}

// checkBinary: an ELF for machine, static (no interpreter, nothing dynamic), built for
// linux/arch without cgo, with the revision stamped in.
func checkBinary(t *testing.T, bin []byte, arch string, machine elf.Machine, short string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("binary: %v", err)
	}
	if f.Machine != machine || f.Class != elf.ELFCLASS64 {
		t.Errorf("ELF machine %v class %v, want %v 64-bit", f.Machine, f.Class, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("program header %v: not a static binary", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("links %v: not a static binary", libs)
	}
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("build info: %v", err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{"GOOS": "linux", "GOARCH": arch, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[k] != want {
			t.Errorf("build setting %s = %q, want %q", k, settings[k], want)
		}
	}
	// -trimpath keeps -ldflags out of the build info, and the binary is stripped: the -X
	// values are only in its string data. The revision is distinctive enough to look for
	// (runVersion checks both values on the host's architecture).
	if !bytes.Contains(bin, []byte(short)) {
		t.Errorf("the binary does not contain the revision %s (-X %s.Revision)", short, versionPkg)
	}
}

// buildDate is the build date make release stamps: the commit's time (SOURCE_DATE_EPOCH), in
// prometheus/common's format.
func buildDate(t *testing.T) string {
	sec, err := strconv.ParseInt(git(t, "log", "-1", "--format=%ct"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(sec, 0).UTC().Format("20060102-15:04:05")
}

// runVersion runs the host architecture's binary: what quota_exporter_build_info will say.
func runVersion(t *testing.T, bin []byte, v, short, date string) {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "quota_exporter")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v: %s", err, out)
	}
	want := fmt.Sprintf("version %s (branch: ", v)
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "revision: "+short+")") ||
		!strings.Contains(string(out), "build date:       "+date+"\n") {
		t.Errorf("--version says %q, want version %s, revision %s and build date %s", out, v, short, date)
	}
}

// TestArchives: each binary archive holds the binary (the same as the image's) and the
// licence files under one directory named for the version and platform.
func TestArchives(t *testing.T) {
	v := version(t)
	for arch := range arches {
		t.Run(arch, func(t *testing.T) {
			dir := fmt.Sprintf("quota_exporter-%s.linux-%s", v, arch)
			f, err := os.Open(filepath.Join(releaseDir, dir+".tar.gz"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			zr, err := gzip.NewReader(f)
			if err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(zr)
			files := map[string][]byte{}
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if h.Uid != 0 || h.Gid != 0 {
					t.Errorf("%s owned by %d:%d", h.Name, h.Uid, h.Gid)
				}
				if h.Typeflag == tar.TypeReg {
					b, _ := io.ReadAll(tr)
					files[h.Name] = b
				}
			}
			for _, n := range []string{"quota_exporter", "LICENSE", "NOTICE", "README.md", "CHANGELOG.md"} {
				if _, ok := files[dir+"/"+n]; !ok {
					t.Errorf("%s.tar.gz lacks %s/%s", dir, dir, n)
				}
			}
			if len(files) != 5 {
				t.Errorf("%d files, want 5", len(files))
			}
			bin, _ := os.ReadFile(filepath.Join(releaseDir, "linux-"+arch, "quota_exporter"))
			if !bytes.Equal(files[dir+"/quota_exporter"], bin) {
				t.Errorf("the archive's binary differs from linux-%s/quota_exporter", arch)
			}
			lic, _ := os.ReadFile(filepath.Join(root, "LICENSE"))
			if !bytes.Equal(files[dir+"/LICENSE"], lic) || !bytes.Contains(lic, []byte("Apache License")) {
				t.Errorf("LICENSE is not the repository's Apache-2.0 text")
			}
		})
	}
}

// TestChecksums: sha256sums.txt covers every archive and image and matches them.
func TestChecksums(t *testing.T) {
	f, err := os.Open(filepath.Join(releaseDir, "sha256sums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("line %q", sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(releaseDir, file))
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.Sum256(b)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: sha256 %x, sha256sums.txt says %s", file, got, sum)
		}
		seen[file] = true
	}
	v := version(t)
	for arch := range arches {
		for _, want := range []string{fmt.Sprintf("quota_exporter-%s.linux-%s.tar.gz", v, arch), "quota-exporter-image-linux-" + arch + ".tar"} {
			if !seen[want] {
				t.Errorf("sha256sums.txt lacks %s", want)
			}
		}
	}
}
