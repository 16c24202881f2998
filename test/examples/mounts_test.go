package examples

import (
	"testing"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// TestDaemonSetMountsSuffice: the kustomize DaemonSet's mounts, arguments, user and capabilities
// are enough for the real exporter (CheckPodMountsSuffice).
func TestDaemonSetMountsSuffice(t *testing.T) {
	_, m := loadManifests(t)
	if len(m.DaemonSets) != 1 {
		t.Fatalf("want one DaemonSet, got %d", len(m.DaemonSets))
	}
	CheckPodMountsSuffice(t, testenv.RepoRoot(), m.DaemonSets[0].Spec.Template.Spec, PodWant{})
}
