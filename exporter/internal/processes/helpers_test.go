//go:build linux

package processes

// countErrs is a cgroups.Recorder that counts what it is told.
type countErrs struct{ n int }

func (c *countErrs) Record(_, _ string, _ error) string { c.n++; return "" }
