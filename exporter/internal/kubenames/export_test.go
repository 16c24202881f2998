package kubenames

// Exported for tests only: the product code does not use these.

// Refresh re-reads both directories now.
func (r *Resolver) Refresh() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refresh()
}
