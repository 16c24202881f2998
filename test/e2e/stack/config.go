package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// TestConfig shortens the mixin's _config so that every alert can fire within a few minutes
// at a 1 s evaluation interval. Thresholds stay as shipped: only `for` durations and windows
// change. The recording rules' 5m rate windows are not configurable and need no change: with
// 1 s scrapes a rate over [5m] has a value after two samples.
var TestConfig = map[string]any{
	// A process younger than this is warming up. The warm-up JVM must still be young when
	// its throttling has lasted warmupFor; the healthy controls are young too and must stay quiet.
	"warmupPeriod": "3m",
	// Memory creep: the cgroup's working-set trend over 3 minutes (cgroups older than 1 minute).
	// Both rss_creep programs grow their live set for ten minutes, the control less, so the
	// horizon is short enough that neither reaches its 2 GiB limit: the arena alert is the one
	// that tells them apart (see the report in e2e_test.go). A JVM's heap grows for its first
	// minutes: over a 3m lookback the healthy JVM (512 MiB limit) projects to its limit in about
	// 15 minutes, so the horizon stays well below that.
	"memoryCreepLookback": "3m",
	"memoryCreepHorizon":  "5m",
	"oomKilledWindow":     "2m",

	"warmupFor":     "15s",
	"stallsFor":     "15s",
	"gcThreadsFor":  "15s",
	"goMaxProcsFor": "15s",
	"goSTWFor":      "15s",
	"safepointFor":  "15s",
	// A JVM's working set jumps in its first minute (the JDK's class data and its JIT), so at
	// the minimum age (a third of the lookback) the healthy JVM's 3m trend once reached its
	// limit for 20 s (4m20s projected, in one run of a fresh clone). In production the 30m `for`
	// outlasts any start-up; here a minute does. No scenario depends on this alert (rss-creep's
	// arena alert arrives first).
	"memoryCreepFor":     "1m",
	"arenaBloatFor":      "15s",
	"memoryNearLimitFor": "15s",
	"systemCPUFor":       "15s",
	"exporterDownFor":    "15s",
	"exporterMissingFor": "15s",
	"collectorFailedFor": "1m",
}

// DemoConfig keeps every threshold and window of the shipped mixin and shortens only the
// `for` durations (10-30 minutes in production, to page on persistent problems) to one
// minute, so that `make demo` shows its alerts within a few minutes. The warm-up JVM is
// throttled in more than half its periods for only 60-90 s on a 0.3-core quota, so its
// alert gets 30 s (shipped: 2m, which it never reaches).
var DemoConfig = map[string]any{
	"warmupFor":          "30s",
	"stallsFor":          "1m",
	"gcThreadsFor":       "1m",
	"goMaxProcsFor":      "1m",
	"goSTWFor":           "1m",
	"safepointFor":       "1m",
	"memoryCreepFor":     "1m",
	"arenaBloatFor":      "1m",
	"memoryNearLimitFor": "1m",
	"systemCPUFor":       "1m",
	"exporterDownFor":    "1m",
	"exporterMissingFor": "1m",
	"collectorFailedFor": "5m",
}

// renderJsonnet renders the mixin with a _config override into quota-alerts.yaml and
// quota-rules.yaml, exactly as quota-exporter-mixin/render/*.jsonnet do.
const renderJsonnet = `
local mixin = (import 'quota-exporter-mixin/mixin.libsonnet') + { _config+:: std.parseJson(std.extVar('config')) };
local yaml(x) = '# Rendered by test/e2e/stack from quota-exporter-mixin/ with a _config override.\n'
  + std.manifestYamlDoc(x, indent_array_in_object=false, quote_keys=false) + '\n';
{
  'quota-alerts.yaml': yaml(mixin.prometheusAlerts),
  'quota-rules.yaml': yaml(mixin.prometheusRules),
}
`

// RenderRules writes quota-alerts.yaml and quota-rules.yaml for config into dir.
func RenderRules(ctx context.Context, root string, config map[string]any, dir string) error {
	if config == nil {
		config = map[string]any{}
	}
	cfg, err := json.Marshal(config)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	jsonnet, err := ToolPath(ctx, root, "tools", "jsonnet")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, jsonnet, "-J", root, "--ext-str", "config="+string(cfg), "-S", "-m", dir, "-e", renderJsonnet)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("rendering the mixin: %w\n%s", err, out)
	}
	return nil
}

// PrometheusConfig scrapes the exporter as job "quota-exporter" (the mixin's default
// selector and the dashboards' job variable) and evaluates the rendered rules. The scrape
// timeout is the whole scrape interval: on a machine busy with parallel builds a scrape of
// all workloads' /proc files once took more than 1 s, and a failed scrape loses the sample.
func PrometheusConfig(scrape, eval time.Duration, exporter, alertmanager, rulesDir string) string {
	return fmt.Sprintf(`# Written by test/e2e/stack.
global:
  scrape_interval: %[1]s
  evaluation_interval: %[5]s
rule_files:
  - %[2]q
alerting:
  alertmanagers:
    - timeout: 30s
      static_configs:
        - targets: [%[3]q]
scrape_configs:
  - job_name: quota-exporter
    scrape_timeout: %[1]s
    static_configs:
      - targets: [%[4]q]
`, scrape, filepath.Join(rulesDir, "quota-*.yaml"), alertmanager, exporter, eval)
}

// AlertmanagerConfig is examples/alertmanager/alertmanager.yml (routes by severity to the
// /alerts and /info webhooks) pointed at our receiver, with short grouping delays.
func AlertmanagerConfig(root, webhookURL string, groupWait, groupInterval time.Duration) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(root, "examples", "alertmanager", "alertmanager.yml"))
	if err != nil {
		return nil, err
	}
	const example = "http://127.0.0.1:9095"
	if !strings.Contains(string(b), example) {
		return nil, fmt.Errorf("examples/alertmanager/alertmanager.yml no longer sends to %s", example)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(string(b), example, webhookURL)), &cfg); err != nil {
		return nil, err
	}
	route, ok := cfg["route"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("alertmanager.yml has no route")
	}
	route["group_wait"] = groupWait.String()
	route["group_interval"] = groupInterval.String()
	return yaml.Marshal(cfg)
}
