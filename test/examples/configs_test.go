package examples

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

func TestPrometheusConfigs(t *testing.T) {
	root := testenv.RepoRoot()
	_, err := exec.LookPath("go")
	require(t, err == nil, "go not in PATH")
	for _, cfg := range []string{"examples/prometheus/prometheus.yml", "examples/docker-compose/prometheus.yml"} {
		out := runTool(t, root, 25*time.Second, "go", "tool", "-modfile="+filepath.Join(root, "tools", "go.mod"),
			"promtool", "check", "config", cfg)
		t.Logf("%s", out)
	}
	// The relative rule_files globs must find the rendered rules from the config's directory.
	var p struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName        string `yaml:"job_name"`
			ScrapeInterval string `yaml:"scrape_interval"`
			StaticConfigs  []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join(root, "examples/prometheus/prometheus.yml")), &p); err != nil {
		t.Fatal(err)
	}
	rendered, _ := filepath.Glob(filepath.Join(root, "alerts", "*.yaml"))
	if len(rendered) > 0 {
		var found []string
		for _, rf := range p.RuleFiles {
			m, _ := filepath.Glob(filepath.Join(root, "examples/prometheus", rf))
			found = append(found, m...)
		}
		slices.Sort(found)
		if !slices.Equal(found, rendered) {
			t.Errorf("rule_files resolve to %v, want the rendered %v", found, rendered)
		}
	}
	if len(p.ScrapeConfigs) != 1 || p.ScrapeConfigs[0].JobName != "quota-exporter" ||
		p.ScrapeConfigs[0].ScrapeInterval != "30s" || len(p.ScrapeConfigs[0].StaticConfigs) != 1 ||
		!slices.Equal(p.ScrapeConfigs[0].StaticConfigs[0].Targets, []string{"localhost:10137"}) {
		t.Errorf("want one job quota-exporter scraping localhost:10137 every 30s (docs/sizing.md), got %+v", p.ScrapeConfigs)
	}
}

func TestAlertmanagerConfig(t *testing.T) {
	root := testenv.RepoRoot()
	cfg := filepath.Join(root, "examples/alertmanager/alertmanager.yml")
	// Alertmanager's own loader, from a module of its own (see amcheck/go.mod).
	out := runTool(t, filepath.Join(root, "test/examples/amcheck"), 25*time.Second, "go", "run", ".", cfg)
	t.Logf("%s", out)

	var am struct {
		Route struct {
			Receiver string   `yaml:"receiver"`
			GroupBy  []string `yaml:"group_by"`
			Routes   []struct {
				Receiver string   `yaml:"receiver"`
				Matchers []string `yaml:"matchers"`
			} `yaml:"routes"`
		} `yaml:"route"`
		Receivers []struct {
			Name           string `yaml:"name"`
			WebhookConfigs []struct {
				URL string `yaml:"url"`
			} `yaml:"webhook_configs"`
		} `yaml:"receivers"`
	}
	if err := yaml.Unmarshal(readFile(t, cfg), &am); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"alertname", "cgroup"} {
		if !slices.Contains(am.Route.GroupBy, l) {
			t.Errorf("group_by lacks %s", l)
		}
	}
	// Which receiver each severity reaches (first matching route, as continue is not set).
	route := func(sev string) string {
		for _, r := range am.Route.Routes {
			for _, m := range r.Matchers {
				if strings.Contains(m, "severity") && strings.Contains(m, sev) {
					return r.Receiver
				}
			}
		}
		return am.Route.Receiver
	}
	if route("critical") != "quota-page" || route("warning") != "quota-page" || route("info") != "quota-info" {
		t.Errorf("routing: critical->%s warning->%s info->%s", route("critical"), route("warning"), route("info"))
	}
	for _, r := range am.Receivers {
		for _, w := range r.WebhookConfigs {
			if !strings.HasPrefix(w.URL, "http://127.0.0.1:") {
				t.Errorf("receiver %s: webhook %s is not on loopback", r.Name, w.URL)
			}
		}
	}
	// Every severity the rendered alerts use must have a route.
	rules, _ := RuleFiles(root)
	for _, f := range rules {
		groups, err := ReadRuleGroups(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			for _, r := range g.Rules {
				if sev := r.Labels["severity"]; r.Alert != "" && !slices.Contains([]string{"critical", "warning", "info"}, sev) {
					t.Errorf("alert %s has severity %q, which no route handles", r.Alert, sev)
				}
			}
		}
	}
}

type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Pid         string            `yaml:"pid"`
	User        string            `yaml:"user"`
	ReadOnly    bool              `yaml:"read_only"`
	CapDrop     []string          `yaml:"cap_drop"`
	CapAdd      []string          `yaml:"cap_add"`
	SecurityOpt []string          `yaml:"security_opt"`
	Volumes     []yaml.Node       `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   []string          `yaml:"depends_on"`
	Healthcheck map[string]any    `yaml:"healthcheck"`
	Restart     string            `yaml:"restart"`
	Cpus        float64           `yaml:"cpus"`
	MemLimit    string            `yaml:"mem_limit"`
}

type composeVolume struct {
	Type     string `yaml:"type"`
	Source   string `yaml:"source"`
	Target   string `yaml:"target"`
	ReadOnly bool   `yaml:"read_only"`
	Bind     struct {
		Propagation string `yaml:"propagation"`
	} `yaml:"bind"`
}

// volumes normalizes short ("src:dst:ro") and long volume syntax.
func volumes(t *testing.T, s composeService) []composeVolume {
	var out []composeVolume
	for _, n := range s.Volumes {
		var v composeVolume
		if n.Kind == yaml.ScalarNode {
			parts := strings.Split(n.Value, ":")
			v = composeVolume{Type: "bind", Source: parts[0], Target: parts[1]}
			v.ReadOnly = len(parts) > 2 && slices.Contains(strings.Split(parts[2], ","), "ro")
		} else if err := n.Decode(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func TestComposeFile(t *testing.T) {
	root := testenv.RepoRoot()
	dir := filepath.Join(root, "examples/docker-compose")
	dec := yaml.NewDecoder(bytes.NewReader(readFile(t, filepath.Join(dir, "docker-compose.yml"))))
	dec.KnownFields(true) // a field outside the subset this test knows is a typo or needs a check
	var c composeFile
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"quota-exporter", "prometheus", "alertmanager", "grafana", "jvm-gc-storm", "go-gomaxprocs"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("service %s missing", name)
		}
	}
	for name, s := range c.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("%s: neither image nor build", name)
		}
		if registryHost(s.Image) {
			t.Errorf("%s: image %s names a registry host", name, s.Image)
		}
		if s.Build != nil {
			ctx := filepath.Join(dir, s.Build.Context)
			df := s.Build.Dockerfile
			if df == "" {
				df = "Dockerfile"
			}
			if name == "quota-exporter" && !exists(filepath.Join(ctx, df)) {
				require(t, false, "the repository's Dockerfile does not exist yet")
				continue
			}
			checkDockerfile(t, name, ctx, filepath.Join(ctx, df))
		}
		for _, v := range volumes(t, s) {
			if v.Type == "bind" && !filepath.IsAbs(v.Source) {
				src := filepath.Join(dir, v.Source)
				if !exists(src) {
					t.Errorf("%s: volume source %s (%s) does not exist", name, v.Source, src)
				}
			}
		}
		for _, d := range s.DependsOn {
			if _, ok := c.Services[d]; !ok {
				t.Errorf("%s depends on unknown service %s", name, d)
			}
		}
	}
	ex := c.Services["quota-exporter"]
	if ex.Image != "quota-exporter:latest" || ex.Pid != "host" || !ex.ReadOnly || ex.User != "0:0" {
		t.Errorf("exporter: image %q pid %q read_only %v user %q", ex.Image, ex.Pid, ex.ReadOnly, ex.User)
	}
	if !slices.Equal(ex.CapDrop, []string{"ALL"}) {
		t.Errorf("exporter cap_drop %v, want [ALL]", ex.CapDrop)
	}
	add := slices.Clone(ex.CapAdd)
	slices.Sort(add)
	if !slices.Equal(add, []string{"DAC_READ_SEARCH", "SYS_PTRACE"}) {
		t.Errorf("exporter cap_add %v", ex.CapAdd)
	}
	if !slices.ContainsFunc(ex.SecurityOpt, func(s string) bool { return strings.HasPrefix(s, "no-new-privileges") }) {
		t.Error("exporter lacks security_opt no-new-privileges")
	}
	mounts := map[string]composeVolume{}
	for _, v := range volumes(t, ex) {
		mounts[v.Source] = v
	}
	// The host directories of HostMounts but the kubelet's (none on a Docker host), read-only.
	want := map[string]string{"/proc": "/host/proc", "/sys/fs/cgroup": "/host/sys/fs/cgroup", "/sys/devices/system/cpu": "/host/sys/devices/system/cpu"}
	for src, dst := range want {
		if v, ok := mounts[src]; !ok || v.Target != dst || !v.ReadOnly {
			t.Errorf("exporter: want %s mounted read-only at %s, got %+v", src, dst, v)
		}
	}
	if len(mounts) != len(want) {
		t.Errorf("exporter mounts %v, want only %v (no host /: --path.rootfs reads nothing)", mounts, want)
	}
	for _, f := range []string{"--path.procfs=/host/proc", "--path.sysfs=/host/sys", "--web.listen-address=:10137"} {
		if !slices.Contains(ex.Command, f) {
			t.Errorf("exporter command lacks %s", f)
		}
	}
	if c.Services["jvm-gc-storm"].Cpus <= 0 || c.Services["go-gomaxprocs"].Cpus != 0.5 {
		t.Error("demo workloads need cpus: limits (gc storm > 0, gomaxprocs 0.5)")
	}
	// The compose Prometheus must scrape the exporter service and find the mounted rules.
	prom := string(readFile(t, filepath.Join(dir, "prometheus.yml")))
	if !strings.Contains(prom, "quota-exporter:10137") || !strings.Contains(prom, "alertmanager:9093") {
		t.Error("compose prometheus.yml must target quota-exporter:10137 and alertmanager:9093")
	}
	// Dashboards rely on a datasource variable: no provisioned uid may be wired into them.
	dashboards, _ := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	for _, d := range dashboards {
		if !bytes.Contains(readFile(t, d), []byte(`"uid": "${datasource}"`)) {
			t.Errorf("%s does not use the datasource variable", filepath.Base(d))
		}
	}
}

// checkDockerfile checks that every COPY source outside another stage exists in the context.
func checkDockerfile(t *testing.T, service, ctx, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %v", service, err)
		return
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	froms := 0
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms++
			if len(f) > 1 && registryHost(f[1]) {
				t.Errorf("%s: %s names a registry host", service, f[1])
			}
		case "COPY", "ADD":
			args := f[1:]
			if len(args) > 0 && strings.HasPrefix(args[0], "--from=") {
				continue
			}
			for len(args) > 0 && strings.HasPrefix(args[0], "--") {
				args = args[1:]
			}
			for _, src := range args[:max(len(args)-1, 0)] {
				if !exists(filepath.Join(ctx, src)) {
					t.Errorf("%s: %s copies %s, missing from the build context %s", service, filepath.Base(path), src, ctx)
				}
			}
		}
	}
	if froms == 0 {
		t.Errorf("%s: %s has no FROM", service, path)
	}
}

func TestWorkloads(t *testing.T) {
	root := testenv.RepoRoot()
	w := filepath.Join(root, "examples/workloads")
	st, err := os.Stat(filepath.Join(w, "run.sh"))
	if err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("run.sh missing or not executable: %v", err)
	}
	runTool(t, w, 10*time.Second, "bash", "-n", "run.sh")
	// Every scenario run.sh knows has its sources (run.sh build would otherwise fail late).
	for _, f := range []string{"jvm-gc-storm/GcStorm.java", "jvm-gc-storm/Dockerfile", "jvm-warmup/GenHot.java",
		"jvm-warmup/Warmup.java", "jvm-healthy/Healthy.java", "go-gomaxprocs/main.go", "go-gomaxprocs/Dockerfile",
		"go-healthy/main.go", "rss-creep/rss_creep.c", "kernel-contention/kernel_contention.c"} {
		if !exists(filepath.Join(w, f)) {
			t.Errorf("%s missing", f)
		}
	}
	// go-gomaxprocs must stay "go 1.24" so Go 1.25's container-aware GOMAXPROCS is off.
	if !bytes.Contains(readFile(t, filepath.Join(w, "go-gomaxprocs/go.mod")), []byte("\ngo 1.24\n")) {
		t.Error("go-gomaxprocs/go.mod must say go 1.24")
	}
	for _, mod := range []string{"go-gomaxprocs", "go-healthy"} {
		runTool(t, filepath.Join(w, mod), 25*time.Second, "go", "vet", ".")
	}
	if _, err := exec.LookPath("gcc"); err == nil {
		for _, c := range []string{"rss-creep/rss_creep.c", "kernel-contention/kernel_contention.c"} {
			runTool(t, w, 10*time.Second, "gcc", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-pthread", c)
		}
	}
}

// registryHost reports whether an image reference starts with a registry host name
// ("host.tld/...", "host:5000/...", "localhost/..."), as Docker decides it.
func registryHost(image string) bool {
	first, _, ok := strings.Cut(image, "/")
	return ok && (strings.ContainsAny(first, ".:") || first == "localhost")
}
