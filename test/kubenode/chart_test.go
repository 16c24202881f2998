package kubenode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/internal/runner"
)

// checkChart installs charts/quota-exporter with its default values (`helm template`, applied
// with kubectl; the operator's CRDs as stand-ins from testdata, since no operator runs here) in
// its own namespace beside the kustomize DaemonSet (pods have their own IPs here), waits until
// its pod passes the chart's readiness and liveness probes, and requires one scrape of it to name
// the GOMAXPROCS pod as the kubelet does.
func checkChart(t *testing.T, ctx context.Context, tg *target, root, work, imageRef string) {
	registry, repository, tag := splitImageRef(imageRef)
	begin := time.Now()
	helm := exec.CommandContext(ctx, "go", "tool", "-modfile="+filepath.Join(root, "tools", "helm", "go.mod"), "helm",
		"template", "qe", filepath.Join(root, "charts", "quota-exporter"), "--namespace", "chart",
		"--kube-version", "1.37.2",
		"--set", "image.registry="+registry, "--set", "image.repository="+repository, "--set", "image.tag="+tag)
	if tg.exporterCPU != "" {
		helm.Args = append(helm.Args, "--set", "resources.limits.cpu="+tg.exporterCPU)
	}
	for i, a := range tg.exporterArgs {
		helm.Args = append(helm.Args, "--set", fmt.Sprintf("extraArgs[%d]=%s", i, a))
	}
	helm.Dir = root
	out, err := helm.Output()
	if err != nil {
		fatalf(t, "helm template: %v", err)
	}
	rendered := time.Since(begin)
	manifest := filepath.Join(work, "chart.yaml")
	must(t, os.WriteFile(manifest, out, 0o644))
	_, err = tg.Kubectl(ctx, "apply", "-f", filepath.Join(root, "test", "kubenode", "testdata", "operator-crds.yaml"))
	must(t, err)
	_, err = tg.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/podmonitors.monitoring.coreos.com", "crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
	must(t, err)
	_, err = tg.Kubectl(ctx, "create", "namespace", "chart")
	must(t, err)
	if out, err := tg.Kubectl(ctx, "apply", "-f", manifest); err != nil {
		fatalf(t, "kubectl apply the chart: %v\n%s", err, out)
	}
	t0 := time.Now()
	t.Logf("chart: helm template %s, the operator's CRDs, namespace and kubectl apply %s",
		rendered.Round(time.Millisecond), t0.Sub(begin.Add(rendered)).Round(time.Millisecond))
	limit := tg.scale(3 * time.Minute)
	deadline := t0.Add(limit)
	for {
		var ready *pod
		for _, p := range pods(t, ctx, tg) {
			if p.Metadata.Namespace != "chart" || p.Status.Phase != "Running" || len(p.Status.ContainerStatuses) == 0 {
				continue
			}
			ok := true
			for _, c := range p.Status.ContainerStatuses {
				ok = ok && c.Ready
			}
			if ok {
				ready = &p
			}
		}
		if ready != nil {
			url := fmt.Sprintf("http://%s:10137/metrics", ready.Status.PodIP)
			f, err := scrapeExporter(ctx, url)
			if err == nil && f.value("quota_go_gomaxprocs", ns, "go-gomaxprocs", "gomaxprocs") > 0 {
				t.Logf("chart: pod %s ready and named the GOMAXPROCS pod %s after kubectl apply", ready.Metadata.Name, time.Since(t0).Round(time.Second))
				return
			}
			if time.Now().After(deadline) {
				fatalf(t, "chart: pod %s ready but its scrape lacks quota_go_gomaxprocs for %s/go-gomaxprocs (err %v)", ready.Metadata.Name, ns, err)
			}
		} else if time.Now().After(deadline) {
			events, _ := tg.Kubectl(ctx, "-n", "chart", "get", "events")
			fatalf(t, "chart: no ready pod within %s\n%s", limit, runner.Tail(events, 4000))
		}
		time.Sleep(2 * time.Second)
	}
}

// splitImageRef splits an image reference as containerd names it (docker.io/library/x:tag for
// x:tag) into the chart's image.registry, image.repository and image.tag.
func splitImageRef(ref string) (registry, repository, tag string) {
	name := ref
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name, tag = ref[:i], ref[i+1:]
	}
	first, rest, ok := strings.Cut(name, "/")
	switch {
	case !ok:
		return "docker.io", "library/" + name, tag
	case strings.ContainsAny(first, ".:") || first == "localhost":
		return first, rest, tag
	default:
		return "docker.io", name, tag
	}
}
