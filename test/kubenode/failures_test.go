package kubenode

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// failures keeps each failed check's first lines (what the node showed, in a few lines): the
// node's logs follow a failure and CI shows only the end of the output, so TestKubeNode repeats
// them last, and writes them to the file KUBENODE_FAILURES names (make test-kubenode prints it
// after go test fails).
var failures struct {
	sync.Mutex
	lines []string
}

func record(t *testing.T, msg string) {
	const maxLines, maxLine = 8, 300
	lines := strings.Split(strings.TrimRight(msg, "\n"), "\n")
	if len(lines) > maxLines {
		lines = append(lines[:maxLines], "  …")
	}
	for i, l := range lines {
		if len(l) > maxLine {
			lines[i] = l[:maxLine] + "…"
		}
	}
	failures.Lock()
	failures.lines = append(failures.lines, t.Name()+": "+strings.Join(lines, "\n    "))
	failures.Unlock()
}

func errorf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	record(t, msg)
	t.Error(msg)
}

func fatalf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	record(t, msg)
	t.Fatal(msg)
}

func fatal(t *testing.T, args ...any) {
	t.Helper()
	fatalf(t, "%s", fmt.Sprint(args...))
}

// reportFailures logs the recorded failures after everything else of the test (register it
// first with t.Cleanup) and writes them to $KUBENODE_FAILURES.
func reportFailures(t *testing.T) {
	failures.Lock()
	defer failures.Unlock()
	if len(failures.lines) == 0 {
		return
	}
	summary := "failed checks:\n" + strings.Join(failures.lines, "\n") + "\n"
	t.Log(summary)
	if f := os.Getenv("KUBENODE_FAILURES"); f != "" {
		if err := os.WriteFile(f, []byte(summary), 0o644); err != nil {
			t.Logf("write %s: %v", f, err)
		}
	}
}
