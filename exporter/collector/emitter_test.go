//go:build linux

package collector

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// TestEmitterExtraLabels: a series with extra labels built on the shared pairs is the one
// client_golang builds, less the empty-valued labels; a descriptor that does not take the
// emitter's labels first falls back to the checked path.
func TestEmitterExtraLabels(t *testing.T) {
	names := []string{"cgroup", "pod_uid", "qos_class"}
	values := []string{"/a", "", "burstable"}
	for _, tc := range []struct {
		desc  *prometheus.Desc
		extra []string
	}{
		{prometheus.NewDesc("x", "h", append(append([]string{}, names...), "mode"), nil), []string{"user"}},
		{prometheus.NewDesc("y", "h", append(append([]string{}, names...), "a_label", "zz"), prometheus.Labels{"c": "k"}), []string{"v\xff", ""}},
		{prometheus.NewDesc("z", "h", []string{"qos_class", "cgroup", "pod_uid", "mode"}, nil), []string{"system"}}, // other order
	} {
		ch := make(chan prometheus.Metric, 2)
		e := newEmitter(ch, names, values)
		e.counter(tc.desc, 1, tc.extra...)
		var got dto.Metric
		if err := withoutEmptyLabels(<-ch).Write(&got); err != nil { // as the Set does
			t.Fatal(err)
		}
		var want dto.Metric
		if err := withoutEmptyLabels(prometheus.MustNewConstMetric(tc.desc, prometheus.CounterValue, 1, e.with(tc.extra)...)).Write(&want); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&got, &want) {
			t.Errorf("%s:\n got %v\nwant %v", tc.desc, &got, &want)
		}
	}
}
