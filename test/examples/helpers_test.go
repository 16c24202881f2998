package examples

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// repoRoot is the repository root, two levels above this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// require is testenv.Require.
var require = testenv.Require

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
