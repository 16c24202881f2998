package diagnose

import (
	"fmt"
	"strconv"
)

// RuleBudget is a tenant over one of the exporter's own budgets: the exporter left some of
// its cgroups, processes, series or reads out, so what diagnose and the alerts see of it is
// incomplete.
const RuleBudget = "exporter_budget"

// Overrun is what one of the exporter's budgets left out of one tenant (a pod; off
// Kubernetes a container, else a top-level cgroup) in its last pass.
type Overrun struct {
	// Budget is cgroups, processes, series, sampled_cgroups or stuck_reads; Reason is
	// "tenant" (its own budget) or "node" (the node-wide ceiling).
	Budget, Reason string
	// Tenant is the tenant's key (pod UID, container id, top-level cgroup), Name how a
	// reader knows it (namespace/pod).
	Tenant, Name string
	// Kept and Skipped are the tenant's units kept and left out (stuck reads: held).
	Kept, Skipped int
	// PerTenant and Node are the budget's limits (0: none).
	PerTenant, Node int
}

// budgetWords name each budget, say what one unit is and what happens to one left out.
var budgetWords = map[string]struct{ title, unit, skipped, flag string }{
	"cgroups":         {"cgroups", "cgroups", "not exported, sampled, watched for OOM kills or listed for processes", "cgroups"},
	"processes":       {"processes", "processes", "not inspected or exported", "processes"},
	"series":          {"series", "series", "not sent in the last scrape", "series"},
	"sampled_cgroups": {"sampled cgroups", "cgroups with a CPU quota", "not sampled every second (no quota_cpu_throttled_window_ratio)", "sampled-cgroups"},
	"stuck_reads":     {"stuck reads", "reads stuck in the kernel", "holding their threads; its other processes' files are not read until they return", "stuck-reads"},
}

// BudgetFindings turns the exporter's overruns into findings, one per tenant and budget.
func BudgetFindings(os []Overrun) []Finding {
	var out []Finding
	for _, o := range os {
		w, ok := budgetWords[o.Budget]
		if !ok {
			continue
		}
		name := o.Name
		if name == "" {
			name = o.Tenant
		}
		f := Finding{Rule: RuleBudget, Severity: Warning, Cgroup: o.Tenant, Workload: name,
			Title: fmt.Sprintf("Tenant over the exporter's %s budget", w.title)}
		flag := "--budget." + w.flag
		if o.Budget == "stuck_reads" {
			f.Evidence = []Fact{{Name: "stuck_reads", Value: float64(o.Kept), Text: fmt.Sprintf("%d reads of its processes' files stuck in the kernel", o.Kept)}}
			if o.Reason == "node" {
				f.Mechanism = fmt.Sprintf("The node's stuck reads reached their ceiling (%s=%d): every new read of that kind is refused until some return.", flag, o.Node)
				f.Fix = Fix{Text: "Find the mount that does not answer (a hung FUSE or NFS server under the tenants' processes) and repair or unmount it; the exporter's reads return with it."}
			} else {
				f.Mechanism = fmt.Sprintf("Its processes' files block in the kernel (a page fault or a file on a FUSE or NFS mount that does not answer): each stuck read holds a thread, and at %d (%s-per-tenant) the tenant's further reads are refused, %s.",
					o.PerTenant, flag, w.skipped)
				f.Fix = Fix{Text: "Find the mount in the tenant's containers that does not answer (a hung FUSE or NFS server) and repair or unmount it; the exporter's reads return with it and its processes are read again."}
			}
			out = append(out, f)
			continue
		}
		f.Evidence = []Fact{
			{Name: "skipped", Value: float64(o.Skipped), Text: fmt.Sprintf("%d %s %s", o.Skipped, w.unit, w.skipped)},
			{Name: "kept", Value: float64(o.Kept), Text: fmt.Sprintf("%d kept", o.Kept)},
		}
		need := o.Kept + o.Skipped
		if o.Reason == "node" {
			f.Mechanism = fmt.Sprintf("The node's %s reached the exporter's ceiling (%s=%d): the largest tenants are cut to a common share, the smaller ones keep all theirs.", w.unit, flag, o.Node)
			f.Fix = Fix{Text: fmt.Sprintf("If the node really runs that many, raise %s (docs/sizing.md: memory grows with it) or watch fewer cgroups (--cgroup.exclude).", flag),
				Settings: map[string]string{flag: strconv.Itoa(o.Node + o.Skipped)}}
		} else {
			f.Mechanism = fmt.Sprintf("The exporter keeps at most %d %s per tenant (%s-per-tenant; the tenant's top cgroups and first processes first), so that one tenant cannot multiply what a root exporter spends and sends.", o.PerTenant, w.unit, flag)
			f.Fix = Fix{Text: fmt.Sprintf("If this tenant really needs %d, raise %s-per-tenant to %d; if it should not have that many, find out what in it creates them.", need, flag, need),
				Settings: map[string]string{flag + "-per-tenant": strconv.Itoa(need)}}
		}
		out = append(out, f)
	}
	Sort(out)
	return out
}

// AddFindings adds findings to a report (the exporter's own, such as budget overruns),
// keeping them worst first and the worst severity up to date.
func (r *Report) AddFindings(fs ...Finding) {
	r.Findings = append(r.Findings, fs...)
	Sort(r.Findings)
	if s := Worst(r.Findings); s != "" {
		r.Worst = string(s)
	}
}
