//go:build linux

package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// The old names still work, set the new flag and say so once in the log; unused, they
// change nothing and log nothing.
func TestRenamedFlags(t *testing.T) {
	for _, c := range []struct {
		args     []string
		binding  bool
		warmup   time.Duration
		warnings int
	}{
		{nil, true, 10 * time.Minute, 0},
		{[]string{"--no-collector.effective"}, false, 10 * time.Minute, 1},
		{[]string{"--collector.effective", "--warmup.window=1m"}, true, time.Minute, 2},
		{[]string{"--no-collector.binding", "--warmup.period=2m"}, false, 2 * time.Minute, 0},
	} {
		app := kingpin.New("test", "")
		binding := app.Flag("collector.binding", "").Default("true").Bool()
		warmup := app.Flag("warmup.period", "").Default("10m").Duration()
		flags := []*renamedFlag{
			renamedBool(app, "collector.effective", "collector.binding", binding),
			renamedDuration(app, "warmup.window", "warmup.period", warmup),
		}
		if _, err := app.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		var log bytes.Buffer
		resolveRenamed(slog.New(slog.NewTextHandler(&log, nil)), flags...)
		if *binding != c.binding || *warmup != c.warmup {
			t.Errorf("%v: binding %v warmup %v, want %v %v", c.args, *binding, *warmup, c.binding, c.warmup)
		}
		if n := strings.Count(log.String(), "deprecated flag"); n != c.warnings {
			t.Errorf("%v: %d deprecation lines, want %d:\n%s", c.args, n, c.warnings, &log)
		}
	}
}
