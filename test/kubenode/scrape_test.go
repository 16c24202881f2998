package kubenode

import (
	"context"
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

type families map[string]*dto.MetricFamily

// scrapeExporter reads one scrape of the exporter directly (the resize check compares series
// of a single scrape).
func scrapeExporter(ctx context.Context, url string) (families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// value is the gauge of name for a namespace/pod/container (empty: any), -1 when absent.
func (f families) value(name, namespace, pod, container string) float64 {
	mf := f[name]
	if mf == nil {
		return -1
	}
	for _, m := range mf.GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["namespace"] == namespace && (pod == "" || l["pod"] == pod) && l["container"] == container {
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
