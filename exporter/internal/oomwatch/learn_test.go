//go:build linux

package oomwatch

import (
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

// A container watched before the kubelet linked it (named by its pod only), named by later
// walks, then OOM-killed and removed, its link gone by the time the kill is exported (seen on
// the kind node: the retained kill came out with container="" and a label set of its own, so
// the alert never saw it rise): the kill keeps the names the last walk gave the container.
func TestRetainedKeepsNamesOfLastWalk(t *testing.T) {
	path := "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod0a.slice/cri-containerd-0b.scope"
	podOnly := cgroupid.KubeNames{Namespace: "kubenode", Pod: "oom"}
	full := cgroupid.KubeNames{Namespace: "kubenode", Pod: "oom", Container: "oom"}
	namer := func(cg *cgroupid.Cgroup) { cg.Names = podOnly } // the link is gone: the pod only
	r := NewRetained(0, namer)
	r.Keep(cgroupid.Cgroup{Path: path, Kind: cgroupid.KindContainer, Names: podOnly}, 1)
	r.Learn(cgroupid.Cgroup{Path: path, Kind: cgroupid.KindContainer, Names: full})
	r.Learn(cgroupid.Cgroup{Path: path}) // a walk without names changes nothing
	g := r.Gone(func(string) bool { return false })
	if len(g) != 1 || g[0].Cgroup.Names != full || g[0].Kills != 1 {
		t.Errorf("retained %+v, want the container's names %+v and 1 kill", g, full)
	}
}
