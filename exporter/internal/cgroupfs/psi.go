//go:build linux

package cgroupfs

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
)

// PSI is the cumulative stall time of a pressure file (cpu.pressure, memory.pressure).
type PSI struct {
	// SomeSeconds: time in which at least one task was stalled waiting for the resource.
	SomeSeconds float64
	// FullSeconds: time in which all non-idle tasks were stalled; HasFull is false where
	// the kernel does not report it (cpu "full" before 5.13).
	FullSeconds float64
	HasFull     bool
}

// ReadPSI reads a cgroup v2 pressure file.
func ReadPSI(path string) (PSI, error) {
	var p PSI
	err := readFile(path, func(b []byte) error { return parsePSI(b, &p) })
	return p, err
}

// ReadPSIFile reads the pressure file of one resource in a cgroup directory.
func ReadPSIFile(dir, resource string) (PSI, error) {
	return ReadPSI(filepath.Join(dir, resource+".pressure"))
}

// parsePSI parses "some avg10=0.00 avg60=0.00 avg300=0.00 total=123" lines; totals are µs.
func parsePSI(b []byte, p *PSI) error {
	hasSome := false
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		var total []byte
		for _, kv := range f[1:] {
			if v, ok := bytes.CutPrefix(kv, []byte("total=")); ok {
				total = v
			}
		}
		if total == nil {
			return fmt.Errorf("%w: no total in %q", ErrParse, truncate(line))
		}
		us, err := strconv.ParseUint(string(total), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: total %q", ErrParse, truncate(total))
		}
		switch string(f[0]) {
		case "some":
			p.SomeSeconds, hasSome = float64(us)/1e6, true
		case "full":
			p.FullSeconds, p.HasFull = float64(us)/1e6, true
		default:
			return fmt.Errorf("%w: unknown line %q", ErrParse, truncate(line))
		}
	}
	if !hasSome {
		return fmt.Errorf("%w: no \"some\" line", ErrParse)
	}
	return nil
}
