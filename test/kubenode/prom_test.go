package kubenode

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/quota-exporter/quota_exporter/test/e2e/stack"
	"github.com/quota-exporter/quota_exporter/test/internal/runner"
	"github.com/quota-exporter/quota_exporter/test/kubenode/node"
)

// monitoring is Prometheus and Alertmanager (the versions pinned in tools/), with the webhook
// receiver of test/e2e/stack recording what Alertmanager sends.
type monitoring struct {
	prom    *stack.Stack // only PromURL is set: its Query and Alerts methods
	webhook *stack.Webhook
	procs   []*exec.Cmd
}

// scrapeConfig is what the Prometheus Operator generates for examples/kubernetes' PodMonitor,
// written as a plain kubernetes_sd_configs (role: pod) job for a Prometheus without the
// operator: the operator's own relabelling (selector, port, target labels, jobLabel), then the
// PodMonitor's relabelings, read from the rendered manifest, in Prometheus' spelling.
func scrapeConfig(t *testing.T, podMonitor map[string]any, cp *node.ControlPlane, scrapeTimeout string) string {
	spec := podMonitor["spec"].(map[string]any)
	meta := podMonitor["metadata"].(map[string]any)
	ep := spec["podMetricsEndpoints"].([]any)[0].(map[string]any)
	selector := spec["selector"].(map[string]any)["matchLabels"].(map[string]any)
	jobLabel, _ := spec["jobLabel"].(string)
	ns := meta["namespace"].(string)
	name := meta["name"].(string)

	var relabel []map[string]any
	for k, v := range selector {
		l := sanitize(k)
		relabel = append(relabel,
			map[string]any{"action": "keep", "source_labels": []string{"__meta_kubernetes_pod_label_" + l, "__meta_kubernetes_pod_labelpresent_" + l}, "regex": fmt.Sprintf("(%s);true", v)})
	}
	relabel = append(relabel,
		map[string]any{"action": "drop", "source_labels": []string{"__meta_kubernetes_pod_phase"}, "regex": "(Failed|Succeeded)"},
		map[string]any{"action": "keep", "source_labels": []string{"__meta_kubernetes_pod_container_port_name"}, "regex": ep["port"]},
		map[string]any{"source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_pod_container_name"}, "target_label": "container"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "pod"},
		map[string]any{"target_label": "job", "replacement": ns + "/" + name},
	)
	if jobLabel != "" {
		relabel = append(relabel, map[string]any{"source_labels": []string{"__meta_kubernetes_pod_label_" + sanitize(jobLabel)}, "target_label": "job", "regex": "(.+)", "replacement": "${1}"})
	}
	relabel = append(relabel, map[string]any{"target_label": "endpoint", "replacement": ep["port"]})
	rename := map[string]string{"sourceLabels": "source_labels", "targetLabel": "target_label"}
	for _, r := range ep["relabelings"].([]any) {
		out := map[string]any{}
		for k, v := range r.(map[string]any) {
			if p, ok := rename[k]; ok {
				k = p
			}
			out[k] = v
		}
		relabel = append(relabel, out)
	}
	job := map[string]any{
		"job_name":        fmt.Sprintf("podMonitor/%s/%s/0", ns, name),
		"honor_labels":    false,
		"scrape_interval": ep["interval"],
		"scrape_timeout":  cmp.Or(scrapeTimeout, ep["scrapeTimeout"].(string)),
		"metrics_path":    ep["path"],
		"kubernetes_sd_configs": []any{map[string]any{
			"role":       "pod",
			"api_server": cp.APIServer,
			"namespaces": map[string]any{"names": []string{ns}},
			"tls_config": map[string]any{"ca_file": cp.PKIFile("ca.crt"), "cert_file": cp.PKIFile("admin.crt"), "key_file": cp.PKIFile("admin.key")},
		}},
		"relabel_configs": relabel,
	}
	b, err := yaml.Marshal(map[string]any{"scrape_configs": []any{job}})
	if err != nil {
		fatal(t, err)
	}
	return string(b)
}

func sanitize(label string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, label)
}

// startMonitoring renders the mixin's rules with stack.TestConfig (the shipped thresholds,
// `for` durations of 15 s), starts Alertmanager with the example routing and Prometheus with
// the PodMonitor's job.
func startMonitoring(t *testing.T, ctx context.Context, root, dir, scrape string) *monitoring {
	m := &monitoring{}
	t.Cleanup(m.stop)
	rules := filepath.Join(dir, "rules")
	if err := stack.RenderRules(ctx, root, stack.TestConfig, rules); err != nil {
		fatal(t, err)
	}
	promBin, err := stack.ToolPath(ctx, root, "tools", "prometheus")
	if err != nil {
		fatal(t, err)
	}
	amBin, err := stack.ToolPath(ctx, root, filepath.Join("tools", "alertmanager"), "alertmanager")
	if err != nil {
		fatal(t, err)
	}
	if m.webhook, err = stack.StartWebhook(nil); err != nil {
		fatal(t, err)
	}
	amCfg, err := stack.AlertmanagerConfig(root, m.webhook.URL, time.Second, 5*time.Second)
	if err != nil {
		fatal(t, err)
	}
	must(t, os.MkdirAll(filepath.Join(dir, "am"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "am", "alertmanager.yml"), amCfg, 0o644))
	ports := freePorts(t, 2)
	amAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	m.start(t, dir, "alertmanager", amBin, "--config.file="+filepath.Join(dir, "am", "alertmanager.yml"),
		"--storage.path="+filepath.Join(dir, "am"), "--web.listen-address="+amAddr, "--cluster.listen-address=")
	cfg := fmt.Sprintf(`global:
  scrape_interval: 5s
  evaluation_interval: 1s
rule_files:
  - %q
alerting:
  alertmanagers:
    - static_configs:
        - targets: [%q]
%s`, filepath.Join(rules, "quota-*.yaml"), amAddr, scrape)
	must(t, os.MkdirAll(filepath.Join(dir, "prom"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "prom", "prometheus.yml"), []byte(cfg), 0o644))
	promAddr := fmt.Sprintf("127.0.0.1:%d", ports[1])
	m.start(t, dir, "prometheus", promBin, "--config.file="+filepath.Join(dir, "prom", "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "prom", "data"), "--web.listen-address="+promAddr)
	m.prom = &stack.Stack{PromURL: "http://" + promAddr}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if n, err := m.prom.RuleCount(ctx); err == nil && n > 0 {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			fatalf(t, "prometheus did not load its rules within 90s:\n%s", runner.Tail(string(b), 3000))
		}
		time.Sleep(500 * time.Millisecond)
	}
	return m
}

func (m *monitoring) start(t *testing.T, dir, name, bin string, args ...string) {
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		fatal(t, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fatal(t, err)
	}
	go func() { cmd.Wait(); f.Close() }()
	m.procs = append(m.procs, cmd)
}

func (m *monitoring) stop() {
	for i := len(m.procs) - 1; i >= 0; i-- {
		p := m.procs[i]
		syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		for j := 0; j < 100 && p.ProcessState == nil; j++ {
			if syscall.Kill(p.Process.Pid, 0) != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
	}
	m.procs = nil
	if m.webhook != nil {
		m.webhook.Close()
		m.webhook = nil
	}
}
