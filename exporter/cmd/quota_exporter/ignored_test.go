//go:build linux

package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// --path.rootfs does nothing: a command line that passes it still parses, and the log says
// once that it is ignored; left out, nothing is logged.
func TestIgnoredFlag(t *testing.T) {
	for _, c := range []struct {
		args     []string
		warnings int
	}{
		{nil, 0},
		{[]string{"--path.rootfs=/host/root"}, 1},
	} {
		app := kingpin.New("test", "")
		flags := []*renamedFlag{ignoredString(app, "path.rootfs")}
		if _, err := app.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		var log bytes.Buffer
		resolveRenamed(slog.New(slog.NewTextHandler(&log, nil)), flags...)
		if n := strings.Count(log.String(), "does nothing"); n != c.warnings {
			t.Errorf("%v: %d warnings, want %d:\n%s", c.args, n, c.warnings, &log)
		}
	}
}
