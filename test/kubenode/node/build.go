package node

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/quota-exporter/quota_exporter/test/internal/runner"
)

// Commands are the Kubernetes binaries a node needs, built from k8sbuild's go.mod.
var Commands = []string{"kubelet", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"}

// CacheDir keeps built Kubernetes binaries between runs, one directory per version and
// go.mod/go.sum content.
const CacheDir = "/var/cache/quota_exporter/k8s"

var requireKubernetes = regexp.MustCompile(`(?m)^require k8s\.io/kubernetes (v\d+\.\d+\.\d+)\s*$`)

// BuildKubernetes returns a directory with Commands built from the wrapper module in modDir
// (test/kubenode/k8sbuild), building them when the cache has no copy. Version ldflags make them
// report the real release instead of v0.0.0-master.
func BuildKubernetes(ctx context.Context, modDir string, logf func(string, ...any)) (string, error) {
	mod, err := os.ReadFile(filepath.Join(modDir, "go.mod"))
	if err != nil {
		return "", err
	}
	sum, err := os.ReadFile(filepath.Join(modDir, "go.sum"))
	if err != nil {
		return "", err
	}
	m := requireKubernetes.FindSubmatch(mod)
	if m == nil {
		return "", fmt.Errorf("%s/go.mod: no `require k8s.io/kubernetes vX.Y.Z` line", modDir)
	}
	version := string(m[1])
	key := sha256.Sum256(append(mod, sum...))
	dir := filepath.Join(CacheDir, fmt.Sprintf("%s-%x", version, key[:6]))
	var missing []string
	for _, c := range Commands {
		if _, err := os.Stat(filepath.Join(dir, c)); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return dir, nil
	}
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	var ld []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		ld = append(ld, "-X", pkg+".gitVersion="+version, "-X", pkg+".gitMajor="+parts[0], "-X", pkg+".gitMinor="+parts[1],
			"-X", pkg+".gitTreeState=clean")
	}
	tmp := dir + fmt.Sprintf(".tmp%d", os.Getpid())
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	args := []string{"build", "-trimpath", "-ldflags", "-s -w " + strings.Join(ld, " "), "-o", tmp + "/"}
	for _, c := range missing {
		args = append(args, "k8s.io/kubernetes/cmd/"+c)
	}
	if logf != nil {
		logf("building Kubernetes %s (%s) into %s: minutes from an empty Go build cache", version, strings.Join(missing, ", "), dir)
	}
	// CGO_ENABLED=1 explicitly: make exports CGO_ENABLED=0 for the exporter, and a different
	// setting than the last build's recompiles every package that depends on net (all of them).
	start := time.Now()
	cmd := []string{"go"}
	out, err := runner.Run(ctx, 30*time.Minute, modDir, []string{"CGO_ENABLED=1", "GOFLAGS=-mod=mod -buildvcs=false"}, append(cmd, args...)...)
	if err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("building Kubernetes: %w\n%s", err, out)
	}
	if logf != nil {
		logf("built Kubernetes %s in %s", version, time.Since(start).Round(time.Second))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, c := range missing {
		if err := os.Rename(filepath.Join(tmp, c), filepath.Join(dir, c)); err != nil {
			return "", err
		}
	}
	os.RemoveAll(tmp)
	return dir, nil
}
