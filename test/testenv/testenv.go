// Package testenv holds what the test module's packages share about their environment: the
// repository's root, the prerequisites, the builds of the exporter and the workloads. This
// module cannot import the main module's internal testutil, so Require and a simpler build
// (into a path the caller names, no cache) are repeated here once.
package testenv

import (
	"os"
	"testing"
)

// Require skips the test when ok is false, or fails it when CI=true: a test that needs root,
// real cgroups, a JDK or qemu must really run on CI.
func Require(t testing.TB, ok bool, reason string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("prerequisite missing on CI (CI=true): %s", reason)
	}
	t.Skipf("skipping: %s", reason)
}
