package crafted

import (
	"sort"
	"strconv"
)

// PerfData is a HotSpot perf data file (the hsperfdata format, version 2.0, little endian,
// marked accessible) of size bytes filled with the smallest entries a parser accepts: 25
// bytes each (a 20-byte entry header, a unique 4-character name, no value), ~42 000 in a
// MiB. It carries none of the counters a JVM writes, the VM start time included, so nothing
// ties it to a process.
func PerfData(size int) []byte {
	const header, entry = 32, 25
	n := (size - header) / entry
	b := make([]byte, header+n*entry)
	copy(b, []byte{0xCA, 0xFE, 0xC0, 0xC0, 1, 2, 0, 1}) // magic, little endian, 2.0, accessible
	le.PutUint32(b[8:], uint32(len(b)))                 // used
	le.PutUint64(b[16:], 1)                             // mod time stamp
	le.PutUint32(b[24:], header)                        // first entry
	le.PutUint32(b[28:], uint32(n))                     // entries
	for i := range n {
		e := b[header+i*entry:][:entry]
		le.PutUint32(e[0:], entry)      // entry length
		le.PutUint32(e[4:], 20)         // name offset
		e[12], e[14], e[15] = 'V', 1, 1 // a type with no value, units none, constant
		le.PutUint32(e[16:], entry)     // data offset: the end (no value)
		name := strconv.FormatInt(int64(i), 36)
		for len(name) < 4 {
			name = "0" + name
		}
		copy(e[20:], name) // then the NUL already there
	}
	return b
}

// PerfDataStrings is a small perf data file holding the given string counters (e.g.
// sun.rt.javaCommand, whose first word names a JVM's process), as a JVM writes them.
func PerfDataStrings(values map[string]string) []byte {
	const header = 32
	b := make([]byte, header)
	copy(b, []byte{0xCA, 0xFE, 0xC0, 0xC0, 1, 2, 0, 1})
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		v := values[name]
		dataOff := (20 + len(name) + 1 + 7) &^ 7
		length := (dataOff + len(v) + 1 + 7) &^ 7
		e := make([]byte, length)
		le.PutUint32(e[0:], uint32(length))
		le.PutUint32(e[4:], 20)
		le.PutUint32(e[8:], uint32(len(v)+1)) // vector length: the bytes with their NUL
		e[12], e[14], e[15] = 'B', 5, 1       // byte array, units string, constant
		le.PutUint32(e[16:], uint32(dataOff))
		copy(e[20:], name)
		copy(e[dataOff:], v)
		b = append(b, e...)
	}
	le.PutUint32(b[8:], uint32(len(b)))
	le.PutUint64(b[16:], 1)
	le.PutUint32(b[24:], header)
	le.PutUint32(b[28:], uint32(len(names)))
	return b
}
