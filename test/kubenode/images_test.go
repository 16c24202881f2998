package kubenode

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/quota-exporter/quota_exporter/test/kubenode/node"
	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// Image names as the pods use them (the kubelet and containerd add "docker.io/").
const (
	pauseRef     = "quota-kubenode/pause:test"
	workloadsRef = "quota-kubenode/workloads:test"
	exporterRef  = "quota-kubenode/quota-exporter:test"
)

// pauseImage: the static pause program (testdata/pause.c).
func pauseImage(t *testing.T, work string) node.Image {
	bin := filepath.Join(work, "pause")
	testenv.BuildC(t, filepath.Join("testdata", "pause.c"), bin, "-static", "-O2")
	return node.Image{Ref: pauseRef, Files: map[string]string{"/pause": bin}, Entrypoint: []string{"/pause"}}
}

// exporterImage is the Dockerfile's image: the static exporter built as `make build` does,
// on an empty base, user 65534 (the DaemonSet runs it as root with two capabilities).
func exporterImage(t *testing.T, root, work string) node.Image {
	bin := filepath.Join(work, "quota_exporter")
	testenv.BuildGo(t, root, "./exporter/cmd/quota_exporter", bin)
	return node.Image{Ref: exporterRef, Files: map[string]string{"/bin/quota_exporter": bin},
		Entrypoint: []string{"/bin/quota_exporter"}, User: "65534:65534"}
}

// workloadsImage holds the programs of examples/workloads (the same sources the e2e test
// runs), a jlinked runtime of the host's JDK with the shared libraries it and the C program
// load, and a static busybox for the shell commands of the OOM and sleeper containers.
func workloadsImage(t *testing.T, root, work string) node.Image {
	w := filepath.Join(root, "examples", "workloads")
	app := filepath.Join(work, "app")
	for _, j := range []struct{ dir, src string }{{"gc-storm", "jvm-gc-storm/GcStorm.java"}, {"healthy", "jvm-healthy/Healthy.java"}} {
		testenv.Tool(t, w, nil, "javac", "-d", filepath.Join(app, j.dir), j.src)
	}
	for _, g := range []string{"go-gomaxprocs", "go-healthy"} {
		testenv.BuildGo(t, filepath.Join(w, g), ".", filepath.Join(app, g))
	}
	testenv.BuildC(t, filepath.Join(w, "rss-creep", "rss_creep.c"), filepath.Join(app, "rss_creep"), "-O2", "-Wall", "-pthread")

	javac, err := exec.LookPath("javac")
	if err != nil {
		fatal(t, err)
	}
	javac, _ = filepath.EvalSymlinks(javac)
	jdkHome := filepath.Dir(filepath.Dir(javac))
	// jlink takes a minute on a busy machine: the runtime is cached per JDK release.
	release, err := os.ReadFile(filepath.Join(jdkHome, "release"))
	if err != nil {
		fatal(t, err)
	}
	jre := filepath.Join(node.CacheDir, "..", "kubenode-jre", fmt.Sprintf("%x", sha256.Sum256(append([]byte(jdkHome), release...)))[:12])
	if _, err := os.Stat(filepath.Join(jre, "bin", "java")); err != nil {
		tmp := fmt.Sprintf("%s.tmp%d", jre, os.Getpid())
		os.RemoveAll(tmp)
		must(t, os.MkdirAll(filepath.Dir(jre), 0o755))
		testenv.Tool(t, work, nil, filepath.Join(jdkHome, "bin", "jlink"), "--add-modules", "java.base,java.management",
			"--strip-debug", "--no-man-pages", "--no-header-files", "--output", tmp)
		must(t, os.Rename(tmp, jre))
	}

	files := map[string]string{"/app": app, "/opt/java": jre}
	// Shared libraries of the JVM and the C program, at the paths the dynamic loader looks for.
	libs, _ := filepath.Glob(filepath.Join(jre, "lib", "*.so"))
	libs = append(libs, filepath.Join(jre, "bin", "java"), filepath.Join(jre, "lib", "server", "libjvm.so"), filepath.Join(app, "rss_creep"))
	for _, l := range sharedLibs(t, libs...) {
		files[l] = l
	}
	busybox := "/bin/busybox"
	for _, c := range []string{"busybox", "sh", "sleep", "tail", "touch", "cat", "test", "["} {
		files["/bin/"+c] = busybox
	}
	return node.Image{
		Ref:   workloadsRef,
		Files: files,
		Data: map[string]string{
			// A passwd entry for root: the JVM writes its hsperfdata only for a named user.
			"/etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n",
			"/etc/group":  "root:x:0:\nnogroup:x:65534:\n",
		},
		Dirs: []string{"/tmp"},
		Env:  []string{"PATH=/opt/java/bin:/app:/bin", "JAVA_HOME=/opt/java"},
	}
}

var lddLine = regexp.MustCompile(`(?m)(?:=>\s*)?(/\S+)\s+\(0x`)

// sharedLibs lists what ldd says the files load (the loader included).
func sharedLibs(t *testing.T, files ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		b, err := exec.Command("ldd", f).CombinedOutput()
		if err != nil {
			continue // static or not an ELF object
		}
		for _, m := range lddLine.FindAllStringSubmatch(string(b), -1) {
			if !seen[m[1]] && !strings.HasPrefix(m[1], filepath.Dir(filepath.Dir(f))) {
				seen[m[1]] = true
				out = append(out, m[1])
			}
		}
	}
	if len(out) == 0 {
		fatalf(t, "ldd found no shared libraries in %v", files)
	}
	return out
}
