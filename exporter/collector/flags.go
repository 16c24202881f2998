//go:build linux

package collector

import (
	"fmt"
	"regexp"

	"github.com/alecthomas/kingpin/v2"
)

// Flags are the collectors' command-line flags. Each file adds the flags of the collector
// or source it holds in its init (addFlags; node_exporter's way), so a collector and its
// flags are one file; main adds them all with AddFlags and reads the Config they set.
type Flags struct {
	cfg     Config
	enabled map[string]*bool
	// finish turns what was parsed into the Config (compiled regexps, units), in order.
	finish []func(*Config) error
}

// flagAdders are the files' flag definitions. Filled by init, read-only after.
var flagAdders []func(app *kingpin.Application, f *Flags)

// addFlags registers a file's flags: add defines them on app, writing into f.cfg (or adding
// a step to f.finish).
func addFlags(add func(app *kingpin.Application, f *Flags)) { flagAdders = append(flagAdders, add) }

// AddFlags defines every collector flag on app: --[no-]collector.<name> for each
// registered collector, then each file's own.
func AddFlags(app *kingpin.Application) *Flags {
	f := &Flags{enabled: map[string]*bool{}}
	for _, name := range Available() {
		def := "false"
		if DefaultEnabled(name) {
			def = "true"
		}
		f.enabled[name] = app.Flag("collector."+name, fmt.Sprintf("Enable the %s collector: %s (default: %s).", name, Help(name), map[string]string{"true": "enabled", "false": "disabled"}[def])).Default(def).Bool()
	}
	for _, add := range flagAdders {
		add(app, f)
	}
	return f
}

// Enabled is the --collector.<name> flag's value (nil for an unknown collector).
func (f *Flags) Enabled(name string) *bool { return f.enabled[name] }

// Collectors are the names of the enabled collectors, sorted.
func (f *Flags) Collectors() []string {
	var names []string
	for _, n := range Available() {
		if *f.enabled[n] {
			names = append(names, n)
		}
	}
	return names
}

// Config is what the parsed flags configure.
func (f *Flags) Config() (Config, error) {
	cfg := f.cfg
	for _, fin := range f.finish {
		if err := fin(&cfg); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// RegexpError is a --*.include or --*.exclude flag that does not compile.
type RegexpError struct {
	Flag string
	Err  error
}

func (e *RegexpError) Error() string { return "--" + e.Flag + ": " + e.Err.Error() }
func (e *RegexpError) Unwrap() error { return e.Err }

// regexpFlag defines a flag whose value must match whole paths or names, compiled into dst
// after parsing (nil for "" and ".*": everything passes).
func (f *Flags) regexpFlag(app *kingpin.Application, name, help, def string, dst func(*Config) **regexp.Regexp) {
	expr := app.Flag(name, help).Default(def).String()
	f.finish = append(f.finish, func(cfg *Config) error {
		re, err := compileAnchored(*expr)
		if err != nil {
			return &RegexpError{Flag: name, Err: err}
		}
		*dst(cfg) = re
		return nil
	})
}

// compileAnchored compiles a flag regexp that must match the whole value; "" matches nothing
// (so an empty exclude excludes nothing) and ".*" everything, which both compile to nil.
func compileAnchored(expr string) (*regexp.Regexp, error) {
	if expr == "" || expr == ".*" {
		return nil, nil
	}
	return regexp.Compile("^(?:" + expr + ")$")
}
