//go:build linux

package kubenames

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

// A container of a known pod that the kubelet has not linked yet is held back (Unlinked) for
// LinkGrace from when a walk first saw it: then it is exported by its pod's names, as one
// never linked must be; a link names it at once, and a container seen again after it went
// starts its grace afresh. Where the containers directory holds no link at all (not
// mounted) nothing is held back.
func TestNamerHoldsBackUnlinkedContainers(t *testing.T) {
	const uid, id = "0e6a1c5e-2d2b-4b8a-9a4e-3f6c1a2b3c4d", "4f1c0de5c0ffee11aa22bb33cc44dd55ee66ff778899aabbccddeeff00112233"
	logs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(logs, "pods", "shop_web-0_"+uid, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := NewNamer(logs, "/proc")
	now := time.Unix(1e9, 0)
	n.now = func() time.Time { return now }
	walk := func() cgroupid.Cgroup {
		cgs := []cgroupid.Cgroup{{Path: "/kubepods/pod" + uid + "/" + id, Kind: cgroupid.KindContainer,
			Identity: cgroupid.Identity{PodUID: uid, ContainerID: "containerd://" + id}, PIDs: []int{os.Getpid()}}}
		n.Name(cgs)
		return cgs[0]
	}
	// No link in the containers directory (not mounted): nothing will name it, not held back.
	if cg := walk(); cg.Unlinked || cg.Names != (cgroupid.KubeNames{Namespace: "shop", Pod: "web-0"}) {
		t.Fatalf("without any link: %+v, want exported by its pod's names", cg)
	}
	n.Name(nil)
	// The kubelet links the pod's other container: it links where the namer looks.
	link := func(ctr, cid string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(logs, "containers"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/var/log/pods/shop_web-0_"+uid+"/"+ctr+"/0.log", filepath.Join(logs, "containers", "web-0_shop_"+ctr+"-"+cid+".log")); err != nil {
			t.Fatal(err)
		}
		n.r.Refresh()
	}
	link("sidecar", strings.Repeat("ab", 32))
	if cg := walk(); !cg.Unlinked || cg.Kind != cgroupid.KindContainer || cg.Names.Pod != "web-0" {
		t.Fatalf("first walk: %+v, want an unlinked container of web-0", cg)
	}
	now = now.Add(LinkGrace - time.Second)
	if cg := walk(); !cg.Unlinked {
		t.Errorf("within the grace: not held back")
	}
	now = now.Add(time.Second)
	if cg := walk(); cg.Unlinked || cg.Names != (cgroupid.KubeNames{Namespace: "shop", Pod: "web-0"}) {
		t.Errorf("after the grace: %+v, want exported by its pod's names", cg)
	}
	n.Name(nil) // a walk without it forgets it
	if cg := walk(); !cg.Unlinked {
		t.Errorf("seen again after it went: not held back")
	}
	link("app", id)
	if cg := walk(); cg.Unlinked || cg.Names.Container != "app" {
		t.Errorf("linked: %+v, want named app", cg)
	}
}
