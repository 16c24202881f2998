package crafted

// BloatPclntab points .gopclntab's section header at a Go 1.20 function table that claims
// funcs functions, all sharing one function record and one name: 8 bytes per function in the
// file, ~150 bytes each once debug/gosym.NewTable has built its Func and Sym for every one.
// The runtime finds its own table through its module data, not the section header, so the
// program still runs.
func (e *ELF) BloatPclntab(funcs int) error {
	const (
		header   = 8 + 8*8 // magic, pad, minLC, ptrSize; then 8 words
		name     = "main.crafted\x00"
		funcSize = 64 // one _func record: entryoff, nameoff, args, ... (zeros are valid)
	)
	nameOff := uint64(header)
	funcdata := (nameOff + uint64(len(name)) + 7) &^ 7
	functab := (2*funcs + 1) * 4 // entryoff and funcoff per function, then the end PC
	size := funcdata + uint64(functab) + funcSize
	t := make([]byte, size)
	le.PutUint32(t[0:], 0xfffffff1) // Go 1.20+
	t[6], t[7] = 1, 8               // minLC (x86), pointer size
	word := func(i int, v uint64) { le.PutUint64(t[8+8*i:], v) }
	word(0, uint64(funcs)) // nfunc
	word(1, 0)             // nfiles
	word(2, 0)             // text start (debug/gosym uses the section's address)
	word(3, nameOff)       // funcname table
	word(4, funcdata)      // cu table (empty)
	word(5, funcdata)      // file table (empty)
	word(6, funcdata)      // pc table (empty)
	word(7, funcdata)      // function table, then the records
	copy(t[nameOff:], name)
	ft := t[funcdata:]
	record := uint32(functab)
	for i := range funcs {
		le.PutUint32(ft[8*i:], uint32(16*i)) // each function 16 bytes of text
		le.PutUint32(ft[8*i+4:], record)     // all share one record (name offset 0)
	}
	le.PutUint32(ft[8*funcs:], uint32(16*funcs))
	off := e.appendAligned(t, 8)
	return e.pointSection(".gopclntab", off, size)
}
