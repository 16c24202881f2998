//go:build linux

package main

import (
	"fmt"
	"strconv"

	"github.com/alecthomas/kingpin/v2"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
)

// budgetFlags adds the --budget.<name>-per-tenant and --budget.<name> flags (docs/sizing.md)
// and returns the limits they set once the flags are parsed.
func budgetFlags(app *kingpin.Application) func() *budget.Limits {
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
	return func() *budget.Limits {
		for _, f := range flags {
			*f.dst = budget.Limit{PerTenant: max(*f.perTenant, 0), Node: max(*f.node, 0)}
		}
		return &out
	}
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
