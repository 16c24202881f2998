package examples

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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

// splitDocs splits a multi-document YAML stream at "---" lines, dropping empty and
// comment-only documents. Each document keeps its final newline (a literal block's last
// line break belongs to the block).
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	flush := func() {
		for _, line := range strings.Split(string(cur), "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				docs = append(docs, cur)
				break
			}
		}
		cur = nil
	}
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if s := strings.TrimRight(string(line), "\r\n"); s == "---" || strings.HasPrefix(s, "--- ") {
			flush()
			continue
		}
		cur = append(cur, line...)
	}
	flush()
	return docs
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
