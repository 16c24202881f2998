//go:build linux

package collector

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
	"github.com/quota-exporter/quota_exporter/exporter/internal/source"
)

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
func (b *Budgets) watch(cgs *source.Cgroups) {
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
