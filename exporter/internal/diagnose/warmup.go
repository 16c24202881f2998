package diagnose

import (
	"fmt"
	"math"
	"strconv"
)

// warmup: a process throttled in its first minutes and not (or not known to be) later wants
// more CPU to warm up than the limit gives; at the limit every deploy starts slow. The fix
// sizes a limit for the measured warm-up demand and keeps the request at the steady state.
func warmup(w *Workload, p Process) (Finding, bool) {
	wu := p.Warmup
	if wu == nil || w.LimitCores <= 0 || wu.ThrottledShare < warmupThrottledShare {
		return Finding{}, false
	}
	if wu.Steady && wu.SteadyThrottledShare >= warmupThrottledShare {
		return Finding{}, false // throttled later too: steady throttling, not warm-up
	}
	if w.kernelBound() {
		return Finding{}, false // kernel time, not warm-up work: the contention finding's
	}
	sev := Warning
	if wu.ThrottledShare >= warmupCriticalShare {
		sev = Critical
	}
	// Throttled time is what runnable threads waited, summed over CPUs: the CPU they would
	// have used on top of what they got, at most.
	demand := wu.Cores + wu.ThrottledCores
	if w.HostCPUs > 0 {
		demand = math.Min(demand, float64(w.HostCPUs))
	}
	if demand < warmupDemandFactor*w.LimitCores {
		return Finding{}, false
	}
	limit := math.Max(math.Ceil(demand*10)/10, math.Round((w.LimitCores+0.1)*10)/10)
	request := w.LimitCores
	if wu.Steady {
		request = math.Max(math.Ceil(wu.SteadyCores*10)/10, 0.1)
	}
	f := newFinding(RuleWarmup, sev, w, &p, "CPU limit below the warm-up demand")
	f.Evidence = []Fact{
		{Name: "warmup_seconds", Value: wu.AgeSeconds, Text: fmt.Sprintf("in its first %s", age(wu.AgeSeconds))},
		{Name: "warmup_usage_cores", Value: wu.Cores, Text: "used " + cores(wu.Cores) + " while warming up"},
		{Name: "warmup_throttled_share", Value: wu.ThrottledShare, Text: fmt.Sprintf("throttled in %.0f%% of its periods then", wu.ThrottledShare*100)},
		{Name: "warmup_demand_cores", Value: demand, Text: "demand " + cores(demand) + " (usage + throttled time)"},
	}
	if wu.Steady {
		f.Evidence = append(f.Evidence,
			Fact{Name: "steady_usage_cores", Value: wu.SteadyCores, Text: fmt.Sprintf("%s later, throttled in %.0f%% of periods", cores(wu.SteadyCores), wu.SteadyThrottledShare*100)})
	}
	f.Evidence = append(f.Evidence, w.limitFacts()...)
	f.Mechanism = fmt.Sprintf("In its first minutes the process needs more CPU than later (JIT compilation, class loading, cold caches); "+
		"the %s limit cuts that demand off, so the warm-up takes longer and the first requests after every start stall.", coreAdj(w.LimitCores))
	f.Fix.Settings = map[string]string{"cpu_limit_cores": strconv.FormatFloat(limit, 'f', -1, 64), "cpu_request_cores": strconv.FormatFloat(request, 'f', -1, 64)}
	steady := "the current limit, as the steady state was not observed"
	if wu.Steady {
		steady = "the steady state"
	}
	f.Fix.Text = fmt.Sprintf("Make the limit%s cover the warm-up: CPU limit %s (the measured warm-up demand) with the request at %s (%s): "+
		"on Kubernetes a Burstable pod, which the scheduler places by its request.", limitOwner(w), cores(limit), cores(request), steady)
	f.Fix.Alternatives = []string{
		fmt.Sprintf("cpu.max.burst (cgroup v2) does not cover it: a burst is at most one period's quota (%.0f ms of CPU), a warm-up lasts minutes", w.LimitCores*period(w)*1e3),
	}
	if p.Runtime == "jvm" {
		f.Fix.Alternatives = append(f.Fix.Alternatives, "or shrink the warm-up itself: an AppCDS archive (-XX:SharedArchiveFile) for class loading, or warm the JIT before taking traffic")
	}
	return f, true
}

// age is seconds as "40 s" or "3.5 min".
func age(s float64) string {
	if s < 120 {
		return fmt.Sprintf("%.0f s", s)
	}
	return strconv.FormatFloat(math.Round(s/6)/10, 'f', -1, 64) + " min"
}
