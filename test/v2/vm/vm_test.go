package vm

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

func encode(s string) string {
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	z.Write([]byte(s))
	z.Close()
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// The console format of section and dumpcg, as the VM's init prints it between kernel
// noise and carriage returns.
func TestParseSections(t *testing.T) {
	console := "Booting from ROM...\n@@BEGIN a@@\n" + encode("one\ntwo\n@@rc=0\n") + "\n@@END a@@\nnoise\n" +
		"@@BEGIN a@@\n" + encode("--- g/cpu.max\nmax 100000\n--- g/memory.current\n4096\n@@rc=1\n") + "\n@@END a@@\n@@BEGIN cut@@\nxx"
	s := parseSections(console)
	r := &Result{sections: s}
	if got := r.Sections("a"); len(got) != 2 || got[0] != "one\ntwo\n" {
		t.Fatalf("sections %q", got)
	}
	f := Files(r.Section("a"))
	if f["g/cpu.max"] != "max 100000\n" || f["g/memory.current"] != "4096\n" || len(f) != 2 {
		t.Errorf("files %q", f)
	}
	if r.Section("cut") != "" || r.Section("none") != "" {
		t.Error("an unfinished or absent section has output")
	}
}

// A VM boots with cgroup2 on /sys/fs/cgroup, the cpu and memory controllers enabled and
// CPUs vCPUs, and its sections come back.
func TestBoot(t *testing.T) {
	h := Find(t)
	im, err := NewImage(h, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := h.Run(ctx, im, "section ctl cat /sys/fs/cgroup/cgroup.subtree_control\nsection cpus nproc\nsection psi cat /sys/fs/cgroup/cpu.pressure")
	if err != nil {
		t.Fatalf("%v\nconsole:\n%s", err, res.Console)
	}
	t.Logf("booted with %s in %v", res.Accel, res.Elapsed)
	if got := strings.TrimSpace(res.Section("ctl")); got != "cpu memory" {
		t.Errorf("subtree_control %q", got)
	}
	if got := strings.TrimSpace(res.Section("cpus")); got != fmt.Sprint(CPUs) {
		t.Errorf("nproc %q", got)
	}
	if !strings.HasPrefix(res.Section("psi"), "some avg10=") {
		t.Errorf("cpu.pressure %q", res.Section("psi"))
	}
}
