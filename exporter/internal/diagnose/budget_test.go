package diagnose

import (
	"strings"
	"testing"
	"time"
)

// Each tenant over a budget is a finding that names the tenant, the budget, what was left
// out and the flag to raise.
func TestBudgetFindings(t *testing.T) {
	fs := BudgetFindings([]Overrun{
		{Budget: "cgroups", Reason: "tenant", Tenant: "/hostile", Name: "/hostile", Kept: 32, Skipped: 1968, PerTenant: 32, Node: 5000},
		{Budget: "series", Reason: "node", Tenant: "uid", Name: "team/web", Kept: 400, Skipped: 20, PerTenant: 2000, Node: 100000},
		{Budget: "stuck_reads", Reason: "tenant", Tenant: "/stuck", Name: "/stuck", Kept: 8, PerTenant: 8, Node: 128},
		{Budget: "unknown"},
	})
	if len(fs) != 3 {
		t.Fatalf("%d findings, want 3: %+v", len(fs), fs)
	}
	by := map[string]Finding{}
	for _, f := range fs {
		if f.Rule != RuleBudget || f.Severity != Warning {
			t.Errorf("finding %+v", f)
		}
		by[f.Workload] = f
	}
	cg := by["/hostile"]
	if !strings.Contains(cg.Title, "cgroups budget") || cg.Evidence[0].Value != 1968 || cg.Fix.Settings["--budget.cgroups-per-tenant"] != "2000" {
		t.Errorf("cgroups finding: %+v", cg)
	}
	if s := by["team/web"]; s.Fix.Settings["--budget.series"] != "100020" || !strings.Contains(s.Mechanism, "ceiling") {
		t.Errorf("series finding: %+v", s)
	}
	if s := by["/stuck"]; s.Evidence[0].Value != 8 || !strings.Contains(s.Fix.Text, "mount") {
		t.Errorf("stuck reads finding: %+v", s)
	}
	r := NewReport("live", 0, nil, false, time.Time{})
	r.AddFindings(fs...)
	if r.Worst != string(Warning) || r.ExitCode() != 1 {
		t.Errorf("report with budget findings: worst %s, exit %d", r.Worst, r.ExitCode())
	}
}
