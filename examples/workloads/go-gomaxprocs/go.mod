// "go 1.24" on purpose: Go 1.25's container-aware GOMAXPROCS defaults off for modules that
// declare go <= 1.24, even when built with a newer toolchain (seed 004's situation).
module github.com/quota-exporter/quota_exporter/examples/workloads/go-gomaxprocs

go 1.24
