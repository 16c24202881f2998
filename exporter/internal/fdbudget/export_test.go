//go:build linux

package fdbudget

// Exported for tests only: the product code does not use these.

// Size is the budget's total.
func (b *Budget) Size() int {
	if b == nil {
		return 0
	}
	return b.size
}
