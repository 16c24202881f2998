//go:build linux

package collector

import (
	"errors"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/gopause"
)

// The collectors' flags, now defined beside each collector, give the Config main built
// from them before: the documented defaults, set values, and a flag regexp that does not
// compile named in the error.
func TestFlags(t *testing.T) {
	parse := func(args ...string) (*Flags, Config, error) {
		t.Helper()
		app := kingpin.New("test", "")
		f := AddFlags(app)
		if _, err := app.Parse(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		cfg, err := f.Config()
		return f, cfg, err
	}
	f, cfg, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ProcPath != "/proc" || cfg.SysPath != "/sys" || cfg.PodLogsPath != "/var/log" || cfg.BareContainerRuntime != "containerd" || cfg.CgroupCheckEvery != 5*time.Second ||
		cfg.ThrottleWindow != time.Second || cfg.ThrottleFullHistograms || cfg.MemoryDetail ||
		cfg.ProcessMinResident != 64<<20 || cfg.SmapsInterval != 5*time.Minute || cfg.OOMRetention != 15*time.Minute ||
		cfg.GoPauseMaxProbes != gopause.DefaultMaxProbes || cfg.GoPausePausesPerSecond != gopause.DefaultPausesPerSecond ||
		cfg.CgroupInclude != nil || cfg.CgroupExclude != nil || cfg.ProcessInclude != nil || cfg.ProcessExclude != nil {
		t.Errorf("defaults: %+v", cfg)
	}
	if cfg.Budgets == nil || *cfg.Budgets != budget.Defaults() {
		t.Errorf("budgets %+v, want the defaults %+v", cfg.Budgets, budget.Defaults())
	}
	for _, n := range f.Collectors() {
		if !DefaultEnabled(n) {
			t.Errorf("collector %s enabled by default", n)
		}
	}

	f, cfg, err = parse("--throttle.window=250ms", "--cgroup.include=/kubepods.*", "--budget.series=7", "--no-collector.cpu", "--memory.detail")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ThrottleWindow != 250*time.Millisecond || !cfg.MemoryDetail || cfg.Budgets.Series.Node != 7 ||
		cfg.CgroupInclude == nil || !cfg.CgroupInclude.MatchString("/kubepods.slice") || cfg.CgroupInclude.MatchString("/x/kubepods") {
		t.Errorf("set: %+v", cfg)
	}
	if *f.Enabled("cpu") {
		t.Error("--no-collector.cpu left the cpu collector enabled")
	}

	var re *RegexpError
	if _, _, err = parse("--process.exclude=(("); !errors.As(err, &re) || re.Flag != "process.exclude" {
		t.Errorf("invalid regexp: %v, want a RegexpError naming process.exclude", err)
	}
}
