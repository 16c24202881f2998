//go:build linux

package processes

import "sync/atomic"

// slots counts the slots made (NewSlot): each is an index into every process's state.
var slots atomic.Int32

// Slot is one reader's typed state on each process, kept across listings and dropped with
// the process (exit or exec): the source keeps it without knowing what the reader stores.
// Make slots once, at package level (var mySlot = processes.NewSlot[myState]()). Values are
// read and written under the process's lock; the reader does its I/O outside it.
type Slot[T any] struct{ index int }

// NewSlot makes a slot; each reader that keeps per-process state makes one.
func NewSlot[T any]() Slot[T] { return Slot[T]{int(slots.Add(1) - 1)} }

// Load is the slot's value on p: the zero T until the reader stored one.
func (sl Slot[T]) Load(p *Process) T {
	p.state.mu.Lock()
	defer p.state.mu.Unlock()
	return sl.get(p.state)
}

// Store sets the slot's value on p.
func (sl Slot[T]) Store(p *Process, v T) {
	p.state.mu.Lock()
	defer p.state.mu.Unlock()
	sl.set(p.state, v)
}

// Swap sets the slot's value on p and returns the one before.
func (sl Slot[T]) Swap(p *Process, v T) T {
	p.state.mu.Lock()
	defer p.state.mu.Unlock()
	old := sl.get(p.state)
	sl.set(p.state, v)
	return old
}

func (sl Slot[T]) get(st *state) T {
	var v T
	if sl.index < len(st.slots) && st.slots[sl.index] != nil {
		v = st.slots[sl.index].(T)
	}
	return v
}

func (sl Slot[T]) set(st *state, v T) {
	for len(st.slots) <= sl.index {
		st.slots = append(st.slots, nil)
	}
	st.slots[sl.index] = v
}
