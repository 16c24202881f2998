//go:build linux

package main

import (
	"log/slog"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// A renamed flag keeps its old name as a hidden alias for one release: given, it sets the
// new flag's value and the log says once to use the new name.
type renamedFlag struct {
	old, now string
	given    bool
	apply    func()
}

type flagAdder interface {
	Flag(name, help string) *kingpin.FlagClause
}

// renamedBool is --[no-]old for the bool flag --now.
func renamedBool(app flagAdder, old, now string, target *bool) *renamedFlag {
	r := &renamedFlag{old: old, now: now}
	v := app.Flag(old, "Renamed to --"+now+".").Hidden().IsSetByUser(&r.given).Bool()
	r.apply = func() { *target = *v }
	return r
}

// renamedDuration is --old for the duration flag --now.
func renamedDuration(app flagAdder, old, now string, target *time.Duration) *renamedFlag {
	r := &renamedFlag{old: old, now: now}
	v := app.Flag(old, "Renamed to --"+now+".").Hidden().IsSetByUser(&r.given).Duration()
	r.apply = func() { *target = *v }
	return r
}

// ignoredString is --old, a string flag that no longer does anything: still accepted
// (hidden), so that command lines that pass it keep starting, and the log says so once.
func ignoredString(app flagAdder, old string) *renamedFlag {
	r := &renamedFlag{old: old, apply: func() {}}
	app.Flag(old, "Ignored.").Hidden().IsSetByUser(&r.given).String()
	return r
}

// resolve copies each given old flag's value to its new flag, and logs the rename (or that
// an ignored flag does nothing).
func resolveRenamed(logger *slog.Logger, flags ...*renamedFlag) {
	for _, r := range flags {
		if !r.given {
			continue
		}
		r.apply()
		if r.now == "" {
			logger.Warn("deprecated flag: it does nothing and will be removed", "flag", "--"+r.old)
			continue
		}
		logger.Warn("deprecated flag: it was renamed and the old name will be removed", "flag", "--"+r.old, "use", "--"+r.now)
	}
}
