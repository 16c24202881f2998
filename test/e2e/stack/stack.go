// Package stack runs the whole quota_exporter pipeline on this host, on loopback with free
// ports: the demo workloads in their own v1 cgroups (examples/workloads/run.sh), the exporter
// (root, the default collectors and Options.ExporterArgs), Prometheus with rules rendered from quota-exporter-mixin/, Alertmanager, and an
// in-process webhook receiver that records what Alertmanager sends. The end-to-end test and
// `make demo` both use it. Everything it starts (processes and cgroups) goes away in Stop.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quota-exporter/quota_exporter/test/internal/runner"
)

// Scenarios are the workloads of examples/workloads/run.sh, one cgroup each.
var Scenarios = []string{
	"jvm-gc-storm", "jvm-warmup", "go-gomaxprocs", "rss-creep", "rss-creep-control",
	"kernel-contention", "jvm-healthy", "go-healthy", "oom-crash",
}

// Controls are the scenarios that must raise no alert.
var Controls = []string{"jvm-healthy", "go-healthy", "rss-creep-control"}

// SmallHostQuotas (µs per 100 ms period) keep the throttling scenarios throttled on a 2-core
// host where all eight workloads run at once: there the GC storm, the warm-up JVM and the
// contending readers each get about a third of a core, below run.sh's 1-core quotas, so CFS
// would never throttle them. With 0.3 cores the quota, not the neighbours, limits them.
var SmallHostQuotas = map[string]int{
	"jvm-gc-storm":      30000,
	"jvm-warmup":        30000,
	"kernel-contention": 30000, // also keeps its usage well above systemCPUMinCores (0.1)
}

// Options configure a stack. Zero values give the defaults noted.
type Options struct {
	Root   string // repository root (required)
	Prefix string // cgroup parent is <Prefix>-<pid>; default "quota-e2e"
	// Layout is run.sh's QUOTA_DEMO_LAYOUT: "flat" (default; one cgroup per scenario under the
	// parent) or "kubepods" (each scenario the one container of a pod, kubelet cgroupfs-driver
	// paths, pod and container limits, names from a kubelet log tree the exporter reads).
	Layout string
	Dir    string // scratch directory (configs, TSDB, logs, workload builds); default a new temp dir

	MixinConfig    map[string]any    // overrides of the mixin's _config (nil: defaults)
	QuotaUS        map[string]int    // per-scenario CPU quota overrides for run.sh
	ScrapeInterval time.Duration     // default 5s (a scrape may take seconds on a loaded machine)
	EvalInterval   time.Duration     // rule evaluation interval; default 1s
	SmapsInterval  time.Duration     // exporter --process.smaps-interval; default 10s
	GroupWait      time.Duration     // Alertmanager group_wait; default 1s
	GroupInterval  time.Duration     // Alertmanager group_interval; default 5s
	ExtraEnv       map[string]string // extra environment for run.sh
	ExporterArgs   []string          // extra exporter flags, e.g. --collector.gopause
	OnAlert        func(Received)    // called for every alert the webhook receives
	Logf           func(format string, args ...any)
}

// Stack is a running pipeline.
type Stack struct {
	opts Options

	Dir         string
	Cgroup      string // parent cgroup name, e.g. quota-e2e-1234
	ExporterURL string // http://127.0.0.1:port
	Instance    string // the exporter's instance label
	PromURL     string
	AMURL       string
	Webhook     *Webhook

	idents map[string]Ident // scenario -> identity at start (restart 0)

	mu      sync.Mutex
	procs   []*proc
	stopped bool
	ownDir  bool
	runSh   string
}

// Ident is what the exporter labels a scenario's container cgroup with.
type Ident struct {
	Cgroup                    string // the cgroup label
	Namespace, Pod, Container string // Kubernetes names; empty in the flat layout
}

// PodCgroup is the cgroup of the scenario's pod (kubepods layout), else its own cgroup.
func (i Ident) PodCgroup() string {
	if i.Pod == "" {
		return i.Cgroup
	}
	return path.Dir(i.Cgroup)
}

// IdentOf is the identity of a scenario's first container (before any restart).
func (s *Stack) IdentOf(scenario string) Ident {
	if id, ok := s.idents[scenario]; ok {
		return id
	}
	return Ident{Cgroup: "/" + s.Cgroup + "/" + scenario}
}

// CgroupOf is the cgroup label of a scenario's (first container's) series.
func (s *Stack) CgroupOf(scenario string) string { return s.IdentOf(scenario).Cgroup }

// Owns tells whether a cgroup label belongs to the scenario: its pod, or any of its containers
// (restarted ones included).
func (s *Stack) Owns(scenario, cgroup string) bool {
	pod := s.IdentOf(scenario).PodCgroup()
	return cgroup == pod || strings.HasPrefix(cgroup, pod+"/")
}

// idents asks run.sh for every scenario's identity.
func (s *Stack) readIdents(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, s.runSh, append([]string{"ident"}, Scenarios...)...)
	cmd.Env = append(os.Environ(), s.workloadEnv()...)
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("run.sh ident: %w", err)
	}
	s.idents = map[string]Ident{}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(Scenarios) {
		return fmt.Errorf("run.sh ident: %d lines for %d scenarios", len(lines), len(Scenarios))
	}
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) != 4 {
			return fmt.Errorf("run.sh ident: bad line %q", line)
		}
		id := Ident{Cgroup: f[0]}
		if f[1] != "-" {
			id.Namespace, id.Pod, id.Container = f[1], f[2], f[3]
		}
		s.idents[Scenarios[i]] = id
	}
	return nil
}

// RestartIfExited restarts a scenario's container as the kubelet would (new container id and
// cgroup, old cgroup removed at once) once nothing runs in it any more; it reports whether it did.
func (s *Stack) RestartIfExited(ctx context.Context, scenario string) (bool, error) {
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", s.CgroupOf(scenario), "cgroup.procs"))
	if err != nil || strings.TrimSpace(string(b)) != "" {
		return false, nil // gone already (restarted), or still running
	}
	s.logf("%s: its container exited; restarting it as the kubelet would", scenario)
	return true, s.run(ctx, time.Minute, s.opts.Root, s.workloadEnv(), s.runSh, "restart", scenario)
}

// PodLogs is the kubelet log tree run.sh writes in the kubepods layout (--path.podlogs).
func (s *Stack) PodLogs() string { return filepath.Join(s.Dir, "workloads", "podlogs") }

func (s *Stack) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

// Start builds and starts everything; on error whatever was started is stopped again.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	if o.Root == "" {
		return nil, errors.New("stack: Options.Root is required")
	}
	if o.Prefix == "" {
		o.Prefix = "quota-e2e"
	}
	if !regexp.MustCompile(`^[A-Za-z0-9._-]+$`).MatchString(o.Prefix) {
		return nil, fmt.Errorf("stack: bad prefix %q", o.Prefix)
	}
	if o.ScrapeInterval == 0 {
		o.ScrapeInterval = 5 * time.Second
	}
	if o.EvalInterval == 0 {
		o.EvalInterval = time.Second
	}
	if o.SmapsInterval == 0 {
		o.SmapsInterval = 10 * time.Second
	}
	if o.GroupWait == 0 {
		o.GroupWait = time.Second
	}
	if o.GroupInterval == 0 {
		o.GroupInterval = 5 * time.Second
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, err
	}
	o.Root = root
	s := &Stack{opts: o, Cgroup: fmt.Sprintf("%s-%d", o.Prefix, os.Getpid()),
		runSh: filepath.Join(root, "examples", "workloads", "run.sh")}
	if o.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", s.Cgroup+"-"); err != nil {
			return nil, err
		}
		s.ownDir = true
	} else {
		s.Dir = o.Dir
	}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	s.cleanStale(ctx)

	// 1. Binaries and rules first, so that Prometheus sees each workload from its first second.
	s.logf("building the exporter and the workloads, rendering the mixin (%s)", s.Dir)
	exporter := filepath.Join(s.Dir, "bin", "quota_exporter")
	if err := s.run(ctx, 5*time.Minute, root, nil, "go", "build", "-trimpath", "-o", exporter, "./exporter/cmd/quota_exporter"); err != nil {
		return nil, fmt.Errorf("building the exporter: %w", err)
	}
	if err := s.run(ctx, 10*time.Minute, root, s.workloadEnv(), s.runSh, "build"); err != nil {
		return nil, fmt.Errorf("building the workloads: %w", err)
	}
	rulesDir := filepath.Join(s.Dir, "rules")
	if err := RenderRules(ctx, root, o.MixinConfig, rulesDir); err != nil {
		return nil, err
	}
	promBin, err := ToolPath(ctx, root, "tools", "prometheus")
	if err != nil {
		return nil, err
	}
	amBin, err := ToolPath(ctx, root, filepath.Join("tools", "alertmanager"), "alertmanager")
	if err != nil {
		return nil, err
	}

	// 2. Webhook receiver (keeps its listener: no port race).
	if s.Webhook, err = StartWebhook(o.OnAlert); err != nil {
		return nil, err
	}

	// 3. Exporter, only our cgroups.
	port, err := runner.FreePort()
	if err != nil {
		return nil, err
	}
	s.Instance = fmt.Sprintf("127.0.0.1:%d", port)
	s.ExporterURL = "http://" + s.Instance
	if err := s.readIdents(ctx); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.PodLogs(), 0o755); err != nil {
		return nil, err
	}
	if err := s.startProc("exporter", exporter, append([]string{
		"--web.listen-address=" + s.Instance,
		"--cgroup.include=/" + regexp.QuoteMeta(s.Cgroup) + "(/.*)?",
		"--process.smaps-interval=" + o.SmapsInterval.String(),
		"--path.podlogs=" + s.PodLogs(),
	}, o.ExporterArgs...)...); err != nil {
		return nil, err
	}
	if err := s.waitHTTP(ctx, "exporter", s.ExporterURL+"/metrics", 60*time.Second); err != nil {
		return nil, err
	}

	// 4. Alertmanager, from examples/alertmanager/alertmanager.yml with our webhook address.
	amPort, err := runner.FreePort()
	if err != nil {
		return nil, err
	}
	s.AMURL = fmt.Sprintf("http://127.0.0.1:%d", amPort)
	amCfg, err := AlertmanagerConfig(root, s.Webhook.URL, o.GroupWait, o.GroupInterval)
	if err != nil {
		return nil, err
	}
	amDir := filepath.Join(s.Dir, "alertmanager")
	if err := os.MkdirAll(filepath.Join(amDir, "data"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(amDir, "alertmanager.yml"), amCfg, 0o644); err != nil {
		return nil, err
	}
	if err := s.startProc("alertmanager", amBin,
		"--config.file="+filepath.Join(amDir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(amDir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", amPort),
		"--cluster.listen-address=", // no HA gossip
	); err != nil {
		return nil, err
	}
	if err := s.waitHTTP(ctx, "alertmanager", s.AMURL+"/-/ready", 60*time.Second); err != nil {
		return nil, err
	}

	// 5. Prometheus.
	promPort, err := runner.FreePort()
	if err != nil {
		return nil, err
	}
	s.PromURL = fmt.Sprintf("http://127.0.0.1:%d", promPort)
	promDir := filepath.Join(s.Dir, "prometheus")
	if err := os.MkdirAll(filepath.Join(promDir, "data"), 0o755); err != nil {
		return nil, err
	}
	promCfg := PrometheusConfig(o.ScrapeInterval, o.EvalInterval, s.Instance, fmt.Sprintf("127.0.0.1:%d", amPort), rulesDir)
	if err := os.WriteFile(filepath.Join(promDir, "prometheus.yml"), []byte(promCfg), 0o644); err != nil {
		return nil, err
	}
	if err := s.startProc("prometheus", promBin,
		"--config.file="+filepath.Join(promDir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(promDir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort),
	); err != nil {
		return nil, err
	}
	if err := s.waitHTTP(ctx, "prometheus", s.PromURL+"/-/ready", 90*time.Second); err != nil {
		return nil, err
	}
	if n, err := s.RuleCount(ctx); err != nil || n == 0 {
		return nil, fmt.Errorf("prometheus loaded %d rules (%v); see %s", n, err, s.LogPath("prometheus"))
	}

	// 6. The workloads (already built, so they start within seconds of each other).
	s.logf("starting the workloads in /sys/fs/cgroup/{cpu,cpuacct,cpuset,memory}/%s/", s.Cgroup)
	if err := s.run(ctx, 5*time.Minute, root, s.workloadEnv(), s.runSh, "start"); err != nil {
		return nil, fmt.Errorf("starting the workloads: %w", err)
	}
	return s, nil
}

// workloadEnv is run.sh's environment: our own state directory and parent cgroup.
func (s *Stack) workloadEnv() []string {
	env := []string{"QUOTA_DEMO_DIR=" + filepath.Join(s.Dir, "workloads"), "QUOTA_DEMO_CGROUP=" + s.Cgroup,
		"QUOTA_DEMO_PODLOGS=" + s.PodLogs()}
	if s.opts.Layout != "" {
		env = append(env, "QUOTA_DEMO_LAYOUT="+s.opts.Layout)
	}
	for name, us := range s.opts.QuotaUS {
		env = append(env, fmt.Sprintf("QUOTA_US_%s=%d", strings.ReplaceAll(name, "-", "_"), us))
	}
	for k, v := range s.opts.ExtraEnv {
		env = append(env, k+"="+v)
	}
	return env
}

// WorkloadLog is the path of a scenario's output.
func (s *Stack) WorkloadLog(scenario string) string {
	return filepath.Join(s.Dir, "workloads", "logs", scenario+".log")
}

// LogPath is the log file of a process the stack started (exporter, prometheus, alertmanager).
func (s *Stack) LogPath(name string) string { return filepath.Join(s.Dir, "logs", name+".log") }

// Status is run.sh status: CPU and throttling counters of every scenario.
func (s *Stack) Status(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.runSh, "status")
	cmd.Env = append(os.Environ(), s.workloadEnv()...)
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// Stop stops the workloads (and removes their cgroups), Prometheus, Alertmanager, the exporter
// and the webhook, and removes the scratch directory it created. Safe to call more than once
// and from a signal handler.
func (s *Stack) Stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	procs := s.procs
	s.mu.Unlock()

	var errs []error
	ctx := context.Background()
	if err := s.run(ctx, 2*time.Minute, s.opts.Root, s.workloadEnv(), s.runSh, "stop"); err != nil {
		errs = append(errs, fmt.Errorf("run.sh stop: %w", err))
	}
	if err := removeCgroups(s.Cgroup); err != nil {
		errs = append(errs, err)
	}
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(10 * time.Second)
	}
	if s.Webhook != nil {
		s.Webhook.Close()
	}
	if s.ownDir && os.Getenv("QUOTA_E2E_KEEP") == "" {
		os.RemoveAll(s.Dir)
	}
	return errors.Join(errs...)
}

// ---- processes ----

type proc = runner.Proc

func (s *Stack) startProc(name, bin string, args ...string) error {
	p, err := runner.Start(name, s.LogPath(name), bin, args...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	s.logf("%s: pid %d, log %s", name, p.Pid(), s.LogPath(name))
	return nil
}

// run runs a short-lived command with a time bound; its output goes to the error on failure.
func (s *Stack) run(ctx context.Context, limit time.Duration, dir string, env []string, name string, args ...string) error {
	out, err := runner.Run(ctx, limit, dir, env, append([]string{name}, args...)...)
	if s.opts.Logf != nil && out != "" {
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			s.logf("  %s", l)
		}
	}
	return err
}

func (s *Stack) waitHTTP(ctx context.Context, name, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var p *proc
	s.mu.Lock()
	for _, q := range s.procs {
		if q.Name == name {
			p = q
		}
	}
	s.mu.Unlock()
	for time.Now().Before(deadline) {
		if p != nil && p.Exited() {
			return fmt.Errorf("%s exited: %s", name, s.logTail(name))
		}
		if resp, err := httpGet(ctx, url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready at %s within %s: %s", name, url, limit, s.logTail(name))
}

func (s *Stack) logTail(name string) string {
	b, _ := os.ReadFile(s.LogPath(name))
	return runner.Tail(string(b), 2000)
}

// Alive reports processes of the stack that have exited (they should all keep running).
func (s *Stack) Exited() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range s.procs {
		if p.Exited() {
			out = append(out, p.Name)
		}
	}
	return out
}

func httpGet(ctx context.Context, url string) (*http.Response, error) {
	// Generous: Prometheus answers dashboard queries slowly on a machine busy with other builds.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	body := resp.Body
	resp.Body = struct {
		io.Reader
		io.Closer
	}{body, closerFunc(func() error { err := body.Close(); cancel(); return err })}
	return resp, nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// ---- tools ----

// ToolPath is the executable of a pinned Go tool (tools/go.mod or tools/alertmanager/go.mod),
// built into the Go cache if `make tools` has not done it yet.
func ToolPath(ctx context.Context, root, modDir, tool string) (string, error) {
	modfile := filepath.Join(root, modDir, "go.mod")
	find := func() (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "tool", "-modfile="+modfile, "-n", tool).Output()
		if err != nil {
			return "", fmt.Errorf("go tool -n %s: %w", tool, err)
		}
		p := strings.TrimSpace(string(out))
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	if p, err := find(); err == nil {
		return p, nil
	}
	ctx2, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx2, "go", "build", "-o", os.DevNull, "tool")
	cmd.Dir = filepath.Join(root, modDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the tools in %s: %w\n%s", modDir, err, out)
	}
	return find()
}

// ---- cgroups ----

var v1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory"}

// removeCgroups kills what is left in a parent cgroup tree and removes it (after run.sh stop
// this normally finds nothing). Bounded: 50 rounds of 100 ms per directory.
func removeCgroups(parent string) error {
	var errs []error
	for _, c := range v1Controllers {
		top := filepath.Join("/sys/fs/cgroup", c, parent)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // leaves first
			d := dirs[i]
			for range 50 {
				if err := syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			if _, err := os.Stat(d); err == nil {
				errs = append(errs, fmt.Errorf("could not remove cgroup %s", d))
			}
		}
	}
	return errors.Join(errs...)
}

// cleanStale removes parent cgroups <prefix>-<pid> left by a stack whose process is gone
// (killed by a test timeout before its cleanup could run).
func (s *Stack) cleanStale(ctx context.Context) {
	ents, _ := os.ReadDir("/sys/fs/cgroup/cpu")
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), s.opts.Prefix+"-")
		if !ok || !e.IsDir() {
			continue
		}
		pid, err := strconv.Atoi(rest)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		s.logf("removing %s left by a stack that is gone", e.Name())
		env := []string{"QUOTA_DEMO_DIR=" + filepath.Join(os.TempDir(), e.Name()+"-stale"), "QUOTA_DEMO_CGROUP=" + e.Name()}
		_ = s.run(ctx, 2*time.Minute, s.opts.Root, env, s.runSh, "stop")
		os.RemoveAll(filepath.Join(os.TempDir(), e.Name()+"-stale"))
		_ = removeCgroups(e.Name())
	}
}
