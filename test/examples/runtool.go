package examples

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// RunTool runs a command with a deadline and fails the test when it fails; a tool that cannot
// start or build in time is a skip locally and a failure on CI.
func RunTool(t *testing.T, dir string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	out, err := RunToolErr(t, dir, timeout, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// RunToolErr is RunTool for a command that may fail: it returns the combined output and the error.
func RunToolErr(t *testing.T, dir string, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	testenv.Require(t, ctx.Err() == nil, name+" "+strings.Join(args, " ")+" did not finish in "+timeout.String()+" (building?)")
	return string(out), err
}

// runTool is RunTool.
var runTool = RunTool
