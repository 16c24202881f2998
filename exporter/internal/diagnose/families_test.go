package diagnose

import (
	"math"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func ptr[T any](v T) *T { return &v }

func metric(value float64, kv ...string) *dto.Metric {
	m := &dto.Metric{Gauge: &dto.Gauge{Value: ptr(value)}}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Label = append(m.Label, &dto.LabelPair{Name: ptr(kv[i]), Value: ptr(kv[i+1])})
	}
	return m
}

func ratio(count, le0 uint64, cg string) *dto.Metric {
	return &dto.Metric{Label: []*dto.LabelPair{{Name: ptr("cgroup"), Value: ptr(cg)}},
		Histogram: &dto.Histogram{SampleCount: ptr(count), Bucket: []*dto.Bucket{{UpperBound: ptr(0.0), CumulativeCount: ptr(le0)}}}}
}

// A container under a pod-level limit: the limit, throttling and windows come from the pod's
// cgroup, counters are increases, the process's Go facts are attached, a NaN is skipped.
func TestFromFamilies(t *testing.T) {
	pod, ctr := "/kubepods/pod1", "/kubepods/pod1/c1"
	gather := func(periods, throttled float64, windows, unthrottled uint64) []*dto.MetricFamily {
		return []*dto.MetricFamily{
			{Name: ptr("quota_cpu_binding_limit_cores"), Metric: []*dto.Metric{metric(0.5, "cgroup", ctr, "binding_cgroup", pod), metric(0.5, "cgroup", pod, "binding_cgroup", pod)}},
			{Name: ptr("quota_cpu_throttled_periods_total"), Metric: []*dto.Metric{metric(throttled, "cgroup", pod)}},
			{Name: ptr("quota_cpu_periods_total"), Metric: []*dto.Metric{metric(periods, "cgroup", pod)}},
			{Name: ptr("quota_cpu_throttled_window_ratio"), Metric: []*dto.Metric{ratio(windows, unthrottled, pod)}},
			{Name: ptr("quota_process_info"), Metric: []*dto.Metric{metric(1, "cgroup", ctr, "process", "api", "runtime", "go", "pid", "42")}},
			{Name: ptr("quota_go_info"), Metric: []*dto.Metric{metric(1, "cgroup", ctr, "process", "api", "version", "go1.25.1", "container_aware", "true")}},
			{Name: ptr("quota_go_gomaxprocs"), Metric: []*dto.Metric{metric(4, "cgroup", ctr, "process", "api")}},
			{Name: ptr("quota_process_threads"), Metric: []*dto.Metric{metric(math.NaN(), "cgroup", ctr, "process", "api")}},
		}
	}
	ws := FromFamilies(gather(100, 10, 3, 3), gather(250, 70, 18, 5), Observation{Span: 15 * time.Second, HostCPUs: 4})
	if len(ws) != 2 {
		t.Fatalf("workloads %+v", ws)
	}
	w := ws[1]
	if w.Cgroup != ctr || w.BindingCgroup != pod || w.LimitCores != 0.5 || w.Periods != 150 || w.ThrottledPeriods != 60 || w.Windows != 15 || w.ThrottledWindows != 13 {
		t.Errorf("workload %+v", w)
	}
	if len(w.Processes) != 1 || w.Processes[0].PID != 42 || w.Processes[0].Go == nil || w.Processes[0].Go.GOMAXPROCS != 4 || !w.Processes[0].Go.ContainerAware || w.Processes[0].Threads != 0 {
		t.Errorf("process %+v", w.Processes)
	}
	f := only(t, Diagnose(ws), RuleGoMaxProcs)
	if f.Fix.Settings["GOMAXPROCS"] != "1" {
		t.Errorf("fix %+v", f.Fix)
	}
}
