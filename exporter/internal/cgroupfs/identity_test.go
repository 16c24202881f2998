package cgroupfs

import "testing"

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
		{"/kubepods/burstable/pod6d1a1e5c0b2f4c3d9e8f7a6b5c4d3e2g/" + id, Identity{"", "containerd://" + id, "burstable"}},
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
		{"/kubepods/burstable/podnot-a-uid/" + id, Identity{"", "containerd://" + id, "burstable"}},
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

func FuzzParseIdentity(f *testing.F) {
	f.Add("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2c3f9a_1d2e_4f5a_8b9c_0d1e2f3a4b5c.slice/cri-containerd-4f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8.scope")
	f.Add(`/kubepods.slice/kubepods\x2dpod\x2.slice/\x`)
	f.Add("/kubepods/pod/")
	f.Fuzz(func(t *testing.T, path string) {
		id := ParseIdentity(path, RuntimeContainerd)
		switch id.QoSClass {
		case "", "guaranteed", "burstable", "besteffort":
		default:
			t.Errorf("qos_class %q", id.QoSClass)
		}
	})
}
