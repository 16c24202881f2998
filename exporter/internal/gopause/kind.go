package gopause

import (
	"errors"
	"go/version"
)

// ErrUnsupported: this kernel or architecture cannot run the probes (no uprobe support, or
// neither x86-64 nor arm64). Unlike a permission error it will not change while the exporter runs.
var ErrUnsupported = errors.New("uprobes not supported here")

// Kind classifies a pause by the runtime's stwReason: "gc" for stwGCMarkTerm (1) and
// stwGCSweepTerm (2), the only GC reasons (runtime/proc.go stwReason.isGC; same values in
// Go 1.21 through 1.26, the enum is append-only), "other" for the rest. Before Go 1.21
// stopTheWorldWithSema had no reason argument: "unknown".
func Kind(goVersion string, reason uint8) string {
	if !ReasonPassed(goVersion) {
		return "unknown"
	}
	if reason == 1 || reason == 2 {
		return "gc"
	}
	return "other"
}

// ReasonPassed tells whether runtime.stopTheWorldWithSema of this Go version takes the
// stwReason argument (Go >= 1.21); an unreadable version counts as no.
func ReasonPassed(goVersion string) bool {
	return version.IsValid(goVersion) && version.Compare(goVersion, "go1.21") >= 0
}
