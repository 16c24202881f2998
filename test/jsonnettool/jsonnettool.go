// Package jsonnettool runs the pinned jsonnet and jsonnet-bundler (jb) of tools/go.mod, for the
// tests that install and render the mixin the way its users do.
package jsonnettool

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var (
	mu    sync.Mutex
	paths = map[string]string{}
)

// Path is the executable of a tool of tools/go.mod (go tool builds it on first use). Resolved
// from the repository root: `go tool -modfile` needs a module directory, and jb must run in the
// project it installs into.
func Path(root, tool string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if p, ok := paths[tool]; ok {
		return p, nil
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	modfile := filepath.Join(root, "tools", "go.mod")
	// go tool -n builds nothing; running the tool once (with -h) puts it into the build cache.
	warm := exec.Command("go", "tool", "-modfile="+modfile, tool, "-h")
	warm.Dir = root
	_ = warm.Run()
	cmd := exec.Command("go", "tool", "-modfile="+modfile, "-n", tool)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go tool -n %s: %w", tool, err)
	}
	paths[tool] = strings.TrimSpace(string(out))
	return paths[tool], nil
}

// Run runs tool with args in dir and returns its standard output; the error carries the
// standard error.
func Run(root, dir, tool string, args ...string) ([]byte, error) {
	bin, err := Path(root, tool)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %v in %s: %w\n%s", tool, args, dir, err, stderr.Bytes())
	}
	return out, nil
}
