//go:build linux

package collector

import (
	"fmt"
	"github.com/alecthomas/kingpin/v2"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

func init() { addFlags(budgetFlags) }

var (
	budgetSkippedDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_budget_skipped_total",
		"quota_exporter: units a budget left out, by budget and reason (reason=\"tenant\": the tenant's own budget, \"node\": the node-wide ceiling). "+
			"cgroups: cgroups not exported, sampled, watched or listed, per discovery walk; processes: processes not inspected, per listing; "+
			"series: series not sent, per scrape; sampled_cgroups: cgroups with a quota the per-second sampler does not sample, per walk it adopts; "+
			"stuck_reads: reads refused while the tenant's (or the node's) stuck reads fill the budget. Which tenant: the log and `quota_exporter diagnose` (no tenant label: it would be unbounded). "+
			"The limits are the --budget.* flags (docs/sizing.md).",
		[]string{"budget", "reason"}, nil))
	budgetTenantsOverDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_budget_tenants_over",
		"quota_exporter: tenants (pods; off Kubernetes containers, else top-level cgroups) that lost units to a budget in its last pass (stuck_reads: whose stuck reads fill their budget now), by budget and reason.",
		[]string{"budget", "reason"}, nil))
	budgetUsedDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_budget_used",
		"quota_exporter: units a budget kept node-wide in its last pass (stuck_reads: stuck reads not returned, both pools), to compare with its node-wide ceiling (--budget.<name>).",
		[]string{"budget"}, nil))
)

// Budgets applies the budget limits where they are spent and exports what they left out:
// the cgroup source (cgroups), the process source (processes), the scrape (series), the
// throttling sampler (sampled cgroups), procread's pools (stuck reads).
type Budgets struct {
	*budget.Book
}

// newBudgets keeps the books of l. procread's pools are the process's: the last Env built
// sets their limits and hears their refusals (one Env per exporter; tests build several).
func newBudgets(l budget.Limits, logger *slog.Logger) *Budgets {
	b := &Budgets{budget.NewBook(l, logger)}
	procread.ProcessFiles.SetLimits(l.StuckReads.Node, l.StuckReads.PerTenant)
	refused := func(tenant, reason string) {
		s := budget.Skip{Budget: budget.StuckReads, Reason: reason, Tenant: tenant}
		if tenant == "" {
			s.Name = "every tenant"
		}
		b.Refused(s)
	}
	procread.ProcessFiles.OnRefuse(refused)
	procread.CgroupFiles.OnRefuse(refused)
	b.Live(budget.StuckReads, func() (int, []budget.Skip) {
		var skips []budget.Skip
		for tenant, n := range procread.ProcessFiles.AtBudget() {
			skips = append(skips, budget.Skip{Budget: budget.StuckReads, Reason: budget.ReasonTenant, Tenant: tenant, Kept: n})
		}
		for _, p := range []*procread.Pool{procread.ProcessFiles, procread.CgroupFiles} {
			if node, _ := p.Limits(); node > 0 && p.Stuck() >= node {
				skips = append(skips, budget.Skip{Budget: budget.StuckReads, Reason: budget.ReasonNode, Tenant: "", Name: "every tenant (" + p.String() + ")", Kept: p.Stuck()})
			}
		}
		return procread.Stuck(), skips
	})
	return b
}

// watch names tenants from the cgroup source's last walk (a refused read knows only its
// tenant's key).
func (b *Budgets) watch(cgs *cgroups.Source) {
	b.SetNamer(func(tenant string) string {
		snap := cgs.Latest()
		if snap == nil {
			return ""
		}
		for _, cg := range snap.Cgroups {
			if budget.TenantOf(cg) == tenant {
				return budget.TenantName(cg)
			}
		}
		return ""
	})
}

// Describe implements prometheus.Collector.
func (b *Budgets) Describe(ch chan<- *prometheus.Desc) {
	ch <- budgetSkippedDesc
	ch <- budgetTenantsOverDesc
	ch <- budgetUsedDesc
}

// Collect implements prometheus.Collector.
func (b *Budgets) Collect(ch chan<- prometheus.Metric) {
	for _, st := range b.States() {
		for _, r := range []string{budget.ReasonTenant, budget.ReasonNode} {
			ch <- prometheus.MustNewConstMetric(budgetSkippedDesc, prometheus.CounterValue, float64(st.Skipped[r]), st.Budget, r)
			ch <- prometheus.MustNewConstMetric(budgetTenantsOverDesc, prometheus.GaugeValue, float64(st.TenantsOver[r]), st.Budget, r)
		}
		ch <- prometheus.MustNewConstMetric(budgetUsedDesc, prometheus.GaugeValue, float64(st.Used), st.Budget)
	}
}

// budgetFlags adds the --budget.<name>-per-tenant and --budget.<name> flags (docs/sizing.md);
// the limits they set become Config.Budgets once the flags are parsed.
func budgetFlags(app *kingpin.Application, fl *Flags) {
	def := budget.Defaults()
	type flag struct {
		name, unit string
		dst        *budget.Limit
		perTenant  *int
		node       *int
	}
	var out budget.Limits
	flags := []flag{
		{name: "cgroups", unit: "cgroups exported (and sampled, watched, listed for processes): each tenant's top cgroups first", dst: &out.Cgroups},
		{name: "processes", unit: "processes inspected (their /proc files read, runtimes detected), in cgroup and PID order", dst: &out.Processes},
		{name: "series", unit: "series sent in one scrape", dst: &out.Series},
		{name: "sampled-cgroups", unit: "cgroups with a CPU quota sampled every --throttle.window", dst: &out.SampledCgroups},
		{name: "stuck-reads", unit: "reads of processes' files stuck in the kernel (each holds a thread; kernel cgroup files have a ceiling of their own)", dst: &out.StuckReads},
	}
	for i := range flags {
		f := &flags[i]
		l := def.Of(budgetName(f.name))
		f.perTenant = app.Flag("budget."+f.name+"-per-tenant",
			fmt.Sprintf("Most %s per tenant (a pod; off Kubernetes a container, else a top-level cgroup); beyond it they are skipped and counted in quota_exporter_budget_skipped_total. 0: no bound.", f.unit)).
			Default(strconv.Itoa(l.PerTenant)).Int()
		f.node = app.Flag("budget."+f.name,
			fmt.Sprintf("Most %s on the node; beyond it the largest tenants are cut to a common share. 0: no bound.", f.unit)).
			Default(strconv.Itoa(l.Node)).Int()
	}
	fl.finish = append(fl.finish, func(cfg *Config) error {
		for _, f := range flags {
			*f.dst = budget.Limit{PerTenant: max(*f.perTenant, 0), Node: max(*f.node, 0)}
		}
		cfg.Budgets = &out
		return nil
	})
}

// budgetName is the budget's name in metrics for its flag's name.
func budgetName(flag string) string {
	switch flag {
	case "sampled-cgroups":
		return budget.SampledCgroups
	case "stuck-reads":
		return budget.StuckReads
	}
	return flag
}
