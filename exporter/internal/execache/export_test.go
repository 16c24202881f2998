package execache

// Exported for tests only: the product code does not use these.

// Len is the number of executables remembered.
func (c *Cache[V]) Len() int {
	if c == nil {
		return 0
	}
	return c.lru.Len()
}
