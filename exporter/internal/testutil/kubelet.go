package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// KubeletContainer is one container as the kubelet's log directories name it.
type KubeletContainer struct{ Namespace, Pod, UID, Container, ID string }

// WriteKubeletLogs lays out the kubelet's log directories under podLogs (the host's
// /var/log) as the kubelet writes them: pods/<namespace>_<pod>_<uid>/<container>/0.log, and
// a containers/ link <pod>_<namespace>_<container>-<id>.log, its name cut at 251 characters
// before ".log" as kuberuntime's logSymlink cuts it, to the host path of that file.
func WriteKubeletLogs(t testing.TB, podLogs string, cs ...KubeletContainer) {
	t.Helper()
	for _, c := range cs {
		podDir := c.Namespace + "_" + c.Pod + "_" + c.UID
		dir := filepath.Join(podLogs, "pods", podDir, c.Container)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "0.log"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(podLogs, "containers"), 0o755); err != nil {
			t.Fatal(err)
		}
		link := c.Pod + "_" + c.Namespace + "_" + c.Container + "-" + c.ID
		if len(link) > 251 {
			link = link[:251]
		}
		if err := os.Symlink("/var/log/pods/"+podDir+"/"+c.Container+"/0.log", filepath.Join(podLogs, "containers", link+".log")); err != nil {
			t.Fatal(err)
		}
	}
}
