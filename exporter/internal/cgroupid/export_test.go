//go:build linux

package cgroupid

// Exported for tests only: the product code does not use these.

// ParseIdentity derives the identity from a cgroup path (see Locate).
func ParseIdentity(path, bareRuntime string) Identity {
	id, _ := Locate(path, bareRuntime)
	return id
}
