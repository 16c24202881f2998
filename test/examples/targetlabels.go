package examples

import (
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
)

// CheckTargetLabels applies the PodMonitor's relabelings, with Prometheus's own relabel code,
// to the target labels the operator generates for an exporter pod: instance must be the node
// name, job quota-exporter (the mixin's selector), and none of the exporter pod's namespace, pod,
// container (or its Service) may reach the workload's series. jobBefore is the job the operator
// gives the target before these relabelings (from the monitor's jobLabel, or its own name);
// exporterLabels are more name, value pairs of the exporter's own that must not survive (a
// ServiceMonitor's service).
func CheckTargetLabels(t testing.TB, rcs []monitoringv1.RelabelConfig, jobBefore string, exporterLabels ...string) {
	t.Helper()
	var cfgs []*relabel.Config
	for _, rc := range rcs {
		c := relabel.DefaultRelabelConfig
		c.NameValidationScheme = model.UTF8Validation
		for _, l := range rc.SourceLabels {
			c.SourceLabels = append(c.SourceLabels, model.LabelName(l))
		}
		if rc.Separator != nil {
			c.Separator = *rc.Separator
		}
		c.TargetLabel = rc.TargetLabel
		if rc.Regex != "" {
			c.Regex = relabel.MustNewRegexp(rc.Regex)
		}
		if rc.Replacement != nil {
			c.Replacement = *rc.Replacement
		}
		if rc.Action != "" {
			c.Action = relabel.Action(strings.ToLower(rc.Action))
		}
		cfgs = append(cfgs, &c)
	}
	// What the operator's generated relabelings leave before the user's (podmonitor job label).
	target := labels.FromStrings(append([]string{
		"__meta_kubernetes_pod_node_name", "node-7",
		"instance", "10.1.2.3:10137", "job", jobBefore,
		"namespace", "monitoring", "pod", "quota-exporter-x7k2p", "container", "quota-exporter", "endpoint", "metrics",
	}, exporterLabels...)...)
	lb := labels.NewBuilder(target)
	keep := relabel.ProcessBuilder(lb, cfgs...)
	got := lb.Labels()
	if !keep {
		t.Fatal("the PodMonitor's relabelings drop the exporter target")
	}
	if v := got.Get("instance"); v != "node-7" {
		t.Errorf("instance = %q, want the node name", v)
	}
	dropped := []string{"namespace", "pod", "container", "endpoint"}
	for i := 0; i+1 < len(exporterLabels); i += 2 {
		dropped = append(dropped, exporterLabels[i])
	}
	for _, l := range dropped {
		if got.Has(l) {
			t.Errorf("target label %s=%q survives: it would overwrite (or, with honor_labels false, rename to exported_%s) the workload's own label", l, got.Get(l), l)
		}
	}
	if v := got.Get("job"); v != "quota-exporter" {
		t.Errorf("job = %q, want quota-exporter", v)
	}
}
