// Test-only module: heavy dependencies (Prometheus's parser, Grafana's dashboard types,
// Kubernetes API types) stay out of the exporter's own go.mod.
module github.com/quota-exporter/quota_exporter/test

go 1.26.0

require (
	github.com/grafana/grafana-foundation-sdk/go v0.0.12 // indirect
	github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring v0.95.0 // indirect
	github.com/prometheus/prometheus v0.315.0 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	k8s.io/api v0.37.2 // indirect
	k8s.io/apimachinery v0.37.2 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)
