package cgroupfs

import (
	"fmt"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
)

// Exported for tests only: the product code does not use these.

// ParseCPUList counts the CPUs in a kernel CPU list such as "0-3,8,10-11" (kernel.CountCPUList),
// a malformed list being ErrParse.
func ParseCPUList(s string) (int, error) {
	n, err := kernel.CountCPUList(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrParse, err)
	}
	return n, nil
}
