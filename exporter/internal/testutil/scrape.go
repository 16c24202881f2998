package testutil

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Families gathers g once (one scrape) and returns its metric families by name; a gather
// error fails the test.
func Families(t testing.TB, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// Exposition gathers g once and returns the text exposition, in name order, without the
// families whose names skip matches (nil: none).
func Exposition(t testing.TB, g prometheus.Gatherer, skip *regexp.Regexp) string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if skip != nil && skip.MatchString(mf.GetName()) {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}
