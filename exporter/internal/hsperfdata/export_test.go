package hsperfdata

import "sort"

// Exported for tests only: the product code does not use these.

// Names lists the entry names, sorted.
func (s *Snapshot) Names() []string {
	out := make([]string, 0, len(s.layout.entries))
	for _, e := range s.layout.entries {
		out = append(out, e.Name)
	}
	sort.Strings(out)
	return out
}

// Seconds returns a ticks counter converted with sun.os.hrt.frequency.
func (s *Snapshot) Seconds(name string) (float64, bool) {
	v, ok := s.Int(name)
	if !ok {
		return 0, false
	}
	f, ok := s.Frequency()
	if !ok {
		return 0, false
	}
	return float64(v) / float64(f), true
}

// Len is the number of entries found.
func (s *Snapshot) Len() int { return len(s.layout.entries) }
