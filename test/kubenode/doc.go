// Package kubenode is the real-node test: a kubelet, containerd, runc, etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler on this host (package node), the exporter deployed
// from examples/kubernetes, workloads from examples/workloads as pods, Prometheus scraping it as
// the PodMonitor says and Alertmanager. `make test-kubenode`; root; about 5 minutes once the
// Kubernetes binaries are cached (k8sbuild builds them from the Go module proxy).
package kubenode
