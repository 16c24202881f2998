module github.com/quota-exporter/quota_exporter/examples/workloads/go-healthy

go 1.25
