package cfsstall_test

import (
	"testing"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// TestBPFObjectsPerArch: the arm64 object is the x86-64 one's twin (same programs and maps;
// only the kprobe registers differ), so it can be checked here.
func TestBPFObjectsPerArch(t *testing.T) {
	testutil.SameBPFObjects(t, "bpfobjs_x86_bpfel.o", "bpfobjs_arm64_bpfel.o")
}
