//go:build linux && amd64

package gopause_test

import (
	"os"
	"testing"

	"golang.org/x/arch/arm64/arm64asm"

	"github.com/quota-exporter/quota_exporter/exporter/internal/gopause"
	"github.com/quota-exporter/quota_exporter/exporter/internal/gopause/gopausetest"
)

// TestFindARM64: in an arm64 build (cross-compiled here, for the arm64 image) the pause ends
// at startTheWorldWithSema's BL to wakep, found through the symbol table and .gopclntab alike;
// the STW reason is passed in R0 (the arm64 BPF object reads it there).
func TestFindARM64(t *testing.T) {
	var unstripped gopause.Targets
	for _, stripped := range []bool{false, true} {
		exe := gopausetest.BuildFor(t, "", "arm64", stripped)
		tg, err := gopause.Find(exe)
		if err != nil {
			t.Fatalf("stripped=%v: %v", stripped, err)
		}
		if tg.FromPclntab != stripped || tg.Stop == 0 || tg.Start == 0 || len(tg.Restarted) != 1 {
			t.Fatalf("stripped=%v: targets %+v, want one restart point (the BL to wakep)", stripped, tg)
		}
		if !gopause.ReasonPassed(tg.GoVersion) {
			t.Fatalf("go version %q", tg.GoVersion)
		}
		code, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := arm64asm.Decode(code[tg.Restarted[0]:])
		if err != nil || inst.Op != arm64asm.BL {
			t.Fatalf("stripped=%v: restart point at %#x is %v (%v), want a BL", stripped, tg.Restarted[0], inst, err)
		}
		if stripped && (tg.Stop != unstripped.Stop || tg.Restarted[0] != unstripped.Restarted[0]) {
			t.Errorf("stripped %+v, unstripped %+v", tg, unstripped)
		}
		unstripped = tg
	}
}
