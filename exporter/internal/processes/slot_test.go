//go:build linux

package processes

import "testing"

// Each reader's slot holds its own typed value per process, zero until stored.
func TestSlots(t *testing.T) {
	type heap struct{ arenas int }
	heapSlot, noteSlot := NewSlot[heap](), NewSlot[bool]()
	p := &Process{state: &state{}}
	if h := heapSlot.Load(p); h.arenas != 0 {
		t.Fatalf("unset slot: %+v", h)
	}
	heapSlot.Store(p, heap{arenas: 3})
	if noteSlot.Swap(p, true) || !noteSlot.Swap(p, true) {
		t.Error("Swap: want false, then true")
	}
	if h := heapSlot.Load(p); h.arenas != 3 {
		t.Errorf("heap slot after the note slot was set: %+v", h)
	}
	if q := (&Process{state: &state{}}); heapSlot.Load(q).arenas != 0 {
		t.Error("a slot's value leaked to another process")
	}
}
