package diagnose

import (
	"fmt"
	"strconv"
)

// kernelContention: a throttled cgroup that spends most of its CPU in the kernel has threads
// contending on one kernel resource (a file's position lock, a socket, mmap_sem). Under a
// quota they run on every CPU of the host, the lock's cache line bounces between all of them,
// and a lock holder throttled at the end of the quota leaves the others waiting on it.
func kernelContention(w *Workload) (Finding, bool) {
	if !w.kernelBound() {
		return Finding{}, false
	}
	periods := w.throttledPeriodsShare()
	n := limitCPUs(w.LimitCores)
	threads := 0
	for _, p := range w.Processes {
		threads += p.Threads
	}
	f := newFinding(RuleKernel, w.cpuSeverity(), w, nil, "Kernel contention under a CPU quota")
	f.Evidence = []Fact{
		{Name: "system_share", Value: w.SystemCores / w.UsageCores, Text: fmt.Sprintf("%.0f%% of the CPU time in the kernel (%s of %s)", 100*w.SystemCores/w.UsageCores, cores(w.SystemCores), cores(w.UsageCores))},
		{Name: "throttled_periods_share", Value: periods, Text: fmt.Sprintf("throttled in %.0f%% of the periods", periods*100)},
	}
	if threads > 0 {
		f.Evidence = append(f.Evidence, Fact{Name: "threads", Value: float64(threads), Text: fmt.Sprintf("%d threads", threads)})
	}
	f.Evidence = append(f.Evidence, w.limitFacts()...)
	f.Mechanism = fmt.Sprintf("The threads contend on a shared kernel resource; a quota lets them run on all the host's CPUs, where they spin and bounce the lock between caches, "+
		"and when the %s quota runs out while one holds the lock, the others wait for it through the rest of the period: the quota burns on contention, not work.", coreAdj(w.LimitCores))
	f.Fix.Settings = map[string]string{"cpuset_cpus": strconv.Itoa(n)}
	if threads > n {
		f.Fix.Settings["threads"] = strconv.Itoa(n)
	}
	f.Fix.Text = fmt.Sprintf("Give the workload %s instead of a quota: a cpuset of %s (on Kubernetes a Guaranteed pod with an integer CPU request of %d "+
		"under the kubelet's static CPU manager policy). Confined to %s the threads use the same CPU time without throttling, a lock holder is never stopped by the quota, "+
		"and the lock stays in fewer caches.", cpus(n, "dedicated "), cpus(n, ""), n, cpus(n, ""))
	if threads > n {
		f.Fix.Alternatives = append(f.Fix.Alternatives, fmt.Sprintf("and cut the threads hitting the shared resource from %d to %d (one per CPU): more only queue on the lock", threads, n))
	}
	f.Fix.Alternatives = append(f.Fix.Alternatives, "find the contended syscall first: perf top -p <pid> or strace -c -f -p <pid> (briefly: strace slows the process)")
	return f, true
}

// kernelBound: a throttled cgroup that spends most of its CPU in the kernel.
func (w *Workload) kernelBound() bool {
	if w.LimitCores <= 0 || w.UsageCores < systemMinCores || w.SystemCores < systemShare*w.UsageCores {
		return false
	}
	return w.throttledPeriodsShare() >= systemThrottledShare || w.throttledShare() >= systemThrottledWindowsShare
}

func (w *Workload) throttledPeriodsShare() float64 {
	if w.Periods <= 0 {
		return 0
	}
	return w.ThrottledPeriods / w.Periods
}

// cpus is "1 CPU", "3 dedicated CPUs".
func cpus(n int, adj string) string {
	if n == 1 {
		return "1 " + adj + "CPU"
	}
	return strconv.Itoa(n) + " " + adj + "CPUs"
}
