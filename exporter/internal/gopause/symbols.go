package gopause

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/quota-exporter/quota_exporter/exporter/internal/elfscan"
	"github.com/quota-exporter/quota_exporter/exporter/internal/goruntime"
)

// The runtime functions whose code bounds a stop-the-world pause.
const (
	StopSymbol  = "runtime.stopTheWorldWithSema"
	StartSymbol = "runtime.startTheWorldWithSema"
	// startTheWorldWithSema calls wakep right after the runtime has recorded the pause in
	// /sched/pauses/total: that call is where the pause ends for the probes too.
	wakepSymbol = "runtime.wakep"
)

// wanted are the functions looked up in an executable.
var wanted = []string{StopSymbol, StartSymbol, wakepSymbol}

// ErrNotGo: the executable has no Go runtime functions to probe (not Go, or too old / odd).
var ErrNotGo = errors.New("no Go stop-the-world functions found")

// Targets are where to attach in one executable, as file offsets (what a uprobe takes): where
// the runtime starts and stops its own /sched/pauses/total clock. It starts at the entry of
// stopTheWorldWithSema; it stops for GC mark termination before startTheWorldWithSema
// (gcMarkTermination passes its timestamp in), for every other pause once the world has been
// started again (Ps handed back, their threads woken), just before startTheWorldWithSema's
// call of wakep (every RET where there is no such call).
// These are plain uprobes on an instruction, not return probes: nothing on the Go stack is
// touched. The Go version decides whether the STW reason is passed.
type Targets struct {
	Stop      uint64
	Start     uint64 // entry of startTheWorldWithSema: the end of GC mark termination pauses
	Restarted []uint64
	GoVersion string // "go1.26.0"; "" if the build info is unreadable
	// FromPclntab: the symbol table was stripped; the functions were found via .gopclntab.
	FromPclntab bool
}

// maxTable caps a function table walked in a binary: .gopclntab, or the ELF symbol table
// (the exporter's own are 2 and 1 MiB; kubelet's 17 MiB). Tables are streamed, so it bounds
// the walk's time, not its memory; they are walked one at a time node-wide (parseMu).
const maxTable = 64 << 20

// maxFunc bounds the code read of startTheWorldWithSema (about 1 KiB in Go 1.26).
const maxFunc = 64 << 10

// MaxRestarted caps the restart points probed in one binary: Go's startTheWorldWithSema has
// one call of wakep (1 probe), older ones a few RETs; a crafted function could have
// thousands, and each would be a uprobe.
const MaxRestarted = 8

// parseMu: one binary's tables walked at a time, whatever the number of new processes.
var parseMu sync.Mutex

// FindIn locates the stop- and start-the-world functions in an ELF image of size bytes read
// through r: from the symbol table, else (stripped with -ldflags=-s) from .gopclntab, which
// the Go runtime itself needs and so is always there. It reads the tables in place (package
// elfscan and funcsInPclntab): what it allocates is bounded by constants, whatever the tables
// claim.
func FindIn(r io.ReaderAt, size int64) (t Targets, err error) {
	defer func() {
		// This reads other people's binaries: a malformed one must cost one error, never
		// the exporter.
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed executable: %v", p)
		}
	}()
	ctx := context.Background() // one parse at a time (parseMu), its time bounded by maxTable
	img := io.NewSectionReader(r, 0, size)
	f, err := elfscan.NewFile(img)
	if err != nil {
		return Targets{}, err
	}
	if f.SectionErr != nil {
		return Targets{}, f.SectionErr
	}
	if b, err := goruntime.BuildOf(f); err == nil && b.Go {
		t.GoVersion = b.GoVersion
	}
	fns, ok, err := fromSymtab(ctx, f)
	if err != nil {
		return Targets{}, err
	}
	if !ok {
		if fns, err = fromPclntab(ctx, f); err != nil {
			return Targets{}, err
		}
		t.FromPclntab = true
	}
	stop, start := fns[StopSymbol], fns[StartSymbol]
	if t.Stop, err = fileOffset(f, stop.lo); err != nil {
		return Targets{}, fmt.Errorf("%s: %w", StopSymbol, err)
	}
	startOff, err := fileOffset(f, start.lo)
	if err != nil {
		return Targets{}, fmt.Errorf("%s: %w", StartSymbol, err)
	}
	t.Start = startOff
	if start.hi <= start.lo || start.hi-start.lo > maxFunc {
		return Targets{}, fmt.Errorf("%s: size %d: %w", StartSymbol, start.hi-start.lo, ErrNotGo)
	}
	code := make([]byte, start.hi-start.lo)
	if _, err := img.ReadAt(code, int64(startOff)); err != nil {
		return Targets{}, fmt.Errorf("%s: %w", StartSymbol, err)
	}
	var offs []uint64
	switch f.Machine {
	case elf.EM_X86_64:
		offs = restartedX86(code, start.lo, fns[wakepSymbol].lo)
	case elf.EM_AARCH64:
		offs = restartedARM64(code, start.lo, fns[wakepSymbol].lo)
	default:
		return Targets{}, fmt.Errorf("%s executable: %w", f.Machine, ErrUnsupported)
	}
	for _, off := range offs {
		t.Restarted = append(t.Restarted, startOff+off)
	}
	if len(t.Restarted) == 0 {
		return Targets{}, fmt.Errorf("%s: no restart point: %w", StartSymbol, ErrNotGo)
	}
	if len(t.Restarted) > MaxRestarted {
		return Targets{}, &RefusedError{Reason: ReasonTooManyProbes, Detail: fmt.Sprintf("%s has %d restart points (cap %d)", StartSymbol, len(t.Restarted), MaxRestarted)}
	}
	return t, nil
}

// span is a function's code: [lo, hi) virtual addresses.
type span struct{ lo, hi uint64 }

// fromSymtab finds the functions in the ELF symbol table, streamed (false: no table, or one
// above maxTable, or without both functions: .gopclntab, which every Go binary has, is tried
// instead).
func fromSymtab(ctx context.Context, f *elfscan.File) (map[string]span, bool, error) {
	s := f.SectionOfType(elf.SHT_SYMTAB)
	if s == nil || s.Size > maxTable {
		return nil, false, nil
	}
	fns := map[string]span{}
	err := f.Symbols(ctx, s, wanted, func(sym elfscan.Symbol) bool {
		if _, seen := fns[sym.Name]; !seen && sym.Type() == elf.STT_FUNC {
			fns[sym.Name] = span{sym.Value, sym.Value + sym.Size}
		}
		return len(fns) == len(wanted)
	})
	if err != nil && !errors.Is(err, elfscan.ErrNotELF) {
		return nil, false, err
	}
	return fns, fns[StopSymbol].lo != 0 && fns[StartSymbol].lo != 0, nil
}

// fromPclntab finds the functions in the Go function table, .gopclntab: the linker writes it
// into every Go executable, stripped or not.
func fromPclntab(ctx context.Context, f *elfscan.File) (map[string]span, error) {
	text := f.Section(".text")
	if text == nil {
		return nil, fmt.Errorf("no .text section: %w", ErrNotGo)
	}
	s := f.Section(".gopclntab")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil, fmt.Errorf("no .gopclntab: %w", ErrNotGo)
	}
	if s.Size > maxTable {
		return nil, &RefusedError{Reason: ReasonTableTooLarge, Detail: fmt.Sprintf(".gopclntab of %d bytes (cap %d)", s.Size, maxTable)}
	}
	fns, err := funcsInPclntab(ctx, f.Reader(), s.Offset, s.Size, text.Addr, wanted)
	if err != nil {
		return nil, err
	}
	if fns[StopSymbol].lo == 0 || fns[StartSymbol].lo == 0 {
		return nil, ErrNotGo
	}
	return fns, nil
}

// restartedX86 lists the offsets in startTheWorldWithSema's x86-64 code (at address base)
// where the world counts as started again: the last call of wakep (at wakepAddr), or every
// RET when there is none. Go functions hold no data between instructions: a linear decode
// finds them.
func restartedX86(code []byte, base, wakepAddr uint64) []uint64 {
	var calls, rets []uint64
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			off++ // padding (INT3) or an undecodable byte: resynchronise
			continue
		}
		switch inst.Op {
		case x86asm.RET:
			rets = append(rets, uint64(off))
		case x86asm.CALL:
			if rel, ok := inst.Args[0].(x86asm.Rel); ok && wakepAddr != 0 &&
				base+uint64(off+inst.Len)+uint64(int64(rel)) == wakepAddr {
				calls = append(calls, uint64(off))
			}
		}
		off += inst.Len
	}
	return lastCallOrRets(calls, rets)
}

// restartedARM64 is restartedX86 for arm64 code: fixed 4-byte instructions, BL's offset
// relative to its own address.
func restartedARM64(code []byte, base, wakepAddr uint64) []uint64 {
	var calls, rets []uint64
	for off := 0; off+4 <= len(code); off += 4 {
		inst, err := arm64asm.Decode(code[off:])
		if err != nil {
			continue // padding or data-free filler
		}
		switch inst.Op {
		case arm64asm.RET:
			rets = append(rets, uint64(off))
		case arm64asm.BL:
			if rel, ok := inst.Args[0].(arm64asm.PCRel); ok && wakepAddr != 0 &&
				base+uint64(off)+uint64(int64(rel)) == wakepAddr {
				calls = append(calls, uint64(off))
			}
		}
	}
	return lastCallOrRets(calls, rets)
}

func lastCallOrRets(calls, rets []uint64) []uint64 {
	if len(calls) > 0 {
		return calls[len(calls)-1:]
	}
	return rets
}

// fileOffset converts a virtual address to its offset in the file through the executable
// PT_LOAD segment that maps it: a uprobe is placed by file offset.
func fileOffset(f *elfscan.File, addr uint64) (uint64, error) {
	if _, off, _, ok := f.Segment(addr, elf.PF_X); ok {
		return off, nil
	}
	return 0, fmt.Errorf("address %#x in no executable segment", addr)
}
