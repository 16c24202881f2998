package cgroupid

import (
	"strings"
	"testing"
)

func TestParseIdentity(t *testing.T) {
	const id = "4f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8"
	tests := []struct {
		path string
		want Identity
	}{
		// Kubernetes, systemd driver.
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice/cri-containerd-" + id + ".scope",
			Identity{"6b2c3f9a-1d2e-4f5a-8b9c-0d1e2f3a4b5c", "containerd://" + id, "burstable"}},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice/crio-" + id + ".scope",
			Identity{"6b2c3f9a-1d2e-4f5a-8b9c-0d1e2f3a4b5c", "cri-o://" + id, "besteffort"}},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice/crio-conmon-" + id + ".scope",
			Identity{"6b2c3f9a-1d2e-4f5a-8b9c-0d1e2f3a4b5c", "", "besteffort"}},
		{"/kubepods.slice/kubepods-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice/docker-" + id + ".scope",
			Identity{"6b2c3f9a-1d2e-4f5a-8b9c-0d1e2f3a4b5c", "docker://" + id, "guaranteed"}},
		{"/kubepods.slice/kubepods-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice",
			Identity{"6b2c3f9a-1d2e-4f5a-8b9c-0d1e2f3a4b5c", "", "guaranteed"}},
		{"/kubepods.slice/kubepods-burstable.slice", Identity{"", "", "burstable"}},
		{"/kubepods.slice", Identity{}},
		// systemd escapes a '-' inside a name as \x2d.
		{`/kubepods.slice/kubepods\x2dburstable.slice/kubepods\x2dburstable\x2dpod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice`,
			Identity{"6b2c3f9a-1d2e-4f5a-8b9c-0d1e2f3a4b5c", "", "burstable"}},
		// Kubernetes, cgroupfs driver.
		{"/kubepods/burstable/pod8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a/" + id,
			Identity{"8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a", "containerd://" + id, "burstable"}},
		{"/kubepods/pod8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a/" + id,
			Identity{"8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a", "containerd://" + id, "guaranteed"}},
		{"/kubepods/besteffort/pod8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a/crio-" + id,
			Identity{"8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a", "cri-o://" + id, "besteffort"}},
		// A static pod: its UID is the kubelet's hash of the manifest, 32 hex digits without dashes.
		{"/kubepods/burstable/pod6d1a1e5c0b2f4c3d9e8f7a6b5c4d3e2f/" + id,
			Identity{"6d1a1e5c0b2f4c3d9e8f7a6b5c4d3e2f", "containerd://" + id, "burstable"}},
		// A segment that is no pod where the kubelet puts pods ends the kubelet's layout.
		{"/kubepods/burstable/pod6d1a1e5c0b2f4c3d9e8f7a6b5c4d3e2g/" + id, Identity{"", "", "burstable"}},
		// Nested under a kubelet with a custom cgroup root (k3s, kind).
		{"/system.slice/k3s.service/kubepods/burstable/pod8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a/" + id,
			Identity{"8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a", "containerd://" + id, "burstable"}},
		// Docker.
		{"/docker/" + id, Identity{"", "docker://" + id, ""}},
		{"/system.slice/docker-" + id + ".scope", Identity{"", "docker://" + id, ""}},
		// systemd services and others: nothing to say.
		{"/system.slice/nginx.service", Identity{}},
		{`/system.slice/app\x2dserver.service`, Identity{}},
		{"/", Identity{}},
		{"/" + id, Identity{}}, // a bare id outside kubepods and docker says nothing
		{"/kubepods/burstable/podnot-a-uid/" + id, Identity{"", "", "burstable"}},
		{"/system.slice/docker-short.scope", Identity{}},
	}
	for _, tt := range tests {
		if got := ParseIdentity(tt.path, RuntimeContainerd); got != tt.want {
			t.Errorf("ParseIdentity(%q)\n got %+v\nwant %+v", tt.path, got, tt.want)
		}
	}
	if got := ParseIdentity("/kubepods/pod8d7c6b5a-4f3e-2d1c-0b9a-8f7e6d5c4b3a/"+id, RuntimeDocker).ContainerID; got != "docker://"+id {
		t.Errorf("bare runtime docker: %q", got)
	}
}

// TestLocate: the layouts the kubelet, containerd, CRI-O with crun, kind and Docker create
// (paths as their sources build them, see docs/cgroups.md), and cgroups a tenant makes below
// its container: the first pod and container segments decide, anything below a container is
// that container's.
func TestLocate(t *testing.T) {
	const (
		idA  = "4f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8"
		idB  = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"
		uidA = "6b2c3f9a-1d2e-4f5a-8b9c-0d1e2f3a4b5c"
		uidB = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
	)
	sd := func(uid string) string { return strings.ReplaceAll(uid, "-", "_") }
	podA := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd(uidA) + ".slice"
	ctrA := podA + "/cri-containerd-" + idA + ".scope"
	crioA := podA + "/crio-" + idA + ".scope"
	// kind: cgroupRoot /kubelet with the systemd driver (kind pkg/cluster/internal/kubeadm/config.go).
	kindPod := "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + sd(uidA) + ".slice"
	kindGuaranteed := "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" + sd(uidB) + ".slice"
	v1A := "/kubepods/burstable/pod" + uidA + "/" + idA
	ctr := Identity{uidA, "containerd://" + idA, "burstable"}
	crio := Identity{uidA, "cri-o://" + idA, "burstable"}
	pod := Identity{uidA, "", "burstable"}
	tests := []struct {
		path  string
		id    Identity
		place Place
	}{
		{podA, pod, Place{Kind: KindPod}},
		{ctrA, ctr, Place{Kind: KindContainer}},
		{kindPod, pod, Place{Kind: KindPod}},
		{kindPod + "/cri-containerd-" + idA + ".scope", ctr, Place{Kind: KindContainer}},
		{kindGuaranteed + "/cri-containerd-" + idB + ".scope", Identity{uidB, "containerd://" + idB, "guaranteed"}, Place{Kind: KindContainer}},
		{"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice", Identity{QoSClass: "besteffort"}, Place{}},
		// kind with the cgroupfs driver, and k3s: a root path before kubepods.
		{"/kubelet/kubepods/burstable/pod" + uidA + "/" + idA, ctr, Place{Kind: KindContainer}},
		{"/kubelet/kubepods/pod" + uidB, Identity{uidB, "", "guaranteed"}, Place{Kind: KindPod}},
		// A slice that is not the kubelet's own child of its parent is not a pod.
		{"/kubepods.slice/kubepods-burstable.slice/other-burstable-pod" + sd(uidA) + ".slice", Identity{QoSClass: "burstable"}, Place{}},
		// CRI-O with crun: the processes in the scope's "container" subgroup, conmon beside it.
		{crioA, crio, Place{Kind: KindContainer}},
		{crioA + "/container", crio, Place{Kind: KindBelowContainer, Container: crioA, RuntimeSubgroup: true}},
		{crioA + "/container/payload", crio, Place{Kind: KindBelowContainer, Container: crioA}},
		{podA + "/crio-conmon-" + idA + ".scope", pod, Place{Kind: KindConmon}},
		{"/system.slice/crio-conmon-" + idA + ".scope", Identity{}, Place{Kind: KindConmon}},
		{"/kubepods/burstable/pod" + uidA + "/crio-conmon-" + idA, pod, Place{Kind: KindConmon}},
		// CRI-O's cgroup of a dropped infra container: crio-<id> without .scope in the pod slice.
		{podA + "/crio-" + idB, Identity{uidA, "cri-o://" + idB, "burstable"}, Place{Kind: KindSandbox}},
		{"/kubepods/burstable/pod" + uidA + "/crio-" + idB, Identity{uidA, "cri-o://" + idB, "burstable"}, Place{Kind: KindContainer}},
		// Tenants below container A naming another pod (B) and its container: still A's.
		{ctrA + "/kubepods-burstable-pod" + sd(uidB) + ".slice/cri-containerd-" + idB + ".scope", ctr, Place{Kind: KindBelowContainer, Container: ctrA}},
		{ctrA + "/x/" + idB, ctr, Place{Kind: KindBelowContainer, Container: ctrA}},
		{ctrA + "/kubepods/burstable/pod" + uidB + "/" + idB, ctr, Place{Kind: KindBelowContainer, Container: ctrA}},
		{v1A + "/kubepods/pod" + uidB + "/" + idB, Identity{uidA, "containerd://" + idA, "burstable"}, Place{Kind: KindBelowContainer, Container: v1A}},
		// containerd's own "container" name below a containerd scope is crun's too (crun with containerd).
		{ctrA + "/container", ctr, Place{Kind: KindBelowContainer, Container: ctrA, RuntimeSubgroup: true}},
		// A cgroupfs container is no systemd scope: a "container" child there is a tenant's.
		{v1A + "/container", Identity{uidA, "containerd://" + idA, "burstable"}, Place{Kind: KindBelowContainer, Container: v1A}},
		// Docker, and a kubelet inside a Docker container seen from the host (kind's nodes): the
		// node container is the container, its pods below it are its own.
		{"/system.slice/docker-" + idA + ".scope", Identity{"", "docker://" + idA, ""}, Place{Kind: KindContainer}},
		{"/system.slice/docker-" + idA + ".scope" + kindPod, Identity{"", "docker://" + idA, ""}, Place{Kind: KindBelowContainer, Container: "/system.slice/docker-" + idA + ".scope"}},
		{"/docker/" + idA + "/docker/" + idB, Identity{"", "docker://" + idA, ""}, Place{Kind: KindBelowContainer, Container: "/docker/" + idA}},
		{"/", Identity{}, Place{}},
		{"/kubepods/burstable/pod" + uidA + "/weird/" + idA, pod, Place{}},
	}
	for _, tt := range tests {
		id, place := Locate(tt.path, RuntimeContainerd)
		if id != tt.id || place != tt.place {
			t.Errorf("Locate(%q)\n got %+v %+v\nwant %+v %+v", tt.path, id, place, tt.id, tt.place)
		}
	}
}

func FuzzParseIdentity(f *testing.F) {
	f.Add("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice/cri-containerd-4f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8.scope")
	f.Add(`/kubepods.slice/kubepods\x2dpod\x2.slice/\x`)
	f.Add("/kubepods/pod/")
	f.Add("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice/crio-4f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8.scope/container")
	f.Fuzz(func(t *testing.T, path string) {
		id, place := Locate(path, RuntimeContainerd)
		if place.Kind == KindBelowContainer && !strings.HasPrefix(path, place.Container) {
			t.Errorf("%q is below %q", path, place.Container)
		}
		switch id.QoSClass {
		case "", "guaranteed", "burstable", "besteffort":
		default:
			t.Errorf("qos_class %q", id.QoSClass)
		}
	})
}
