//go:build linux

package collector

import "github.com/quota-exporter/quota_exporter/exporter/internal/throttle"

// series is the sampler's series by cgroup path, for tests that drive it window by window.
func (c *throttleCollector) series() map[string]*throttle.Series {
	var m map[string]*throttle.Series
	c.sampler.Read(func(st throttle.State) { m = st.Series })
	return m
}
