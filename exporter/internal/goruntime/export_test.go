package goruntime

import "strings"

// Exported for tests only: the product code does not use these.

// ParseGODEBUG splits a GODEBUG value ("k=v,k2=v2") into a map; later keys win, fields
// without '=' are ignored (runtime1.go parsegodebug).
func ParseGODEBUG(s string) map[string]string {
	out := map[string]string{}
	for field := range strings.SplitSeq(s, ",") {
		if k, v, ok := strings.Cut(field, "="); ok {
			out[k] = v
		}
	}
	return out
}
