// Package hostile is the hostile-node test (issue 29): the real exporter binary, with its
// default collectors and the DaemonSet's limits (256 MiB of memory, 500m of CPU), on a node
// laid out as the kubelet lays one out on this host's v1 cgroups, beside a calm pod and
// hostile tenants that plant every class of issue 29 (Classes) for the run. Scraped every
// 15 s with a 10 s timeout, as Prometheus would, it must never be OOM-killed or exit, answer
// every scrape on time, keep its peak memory (the memory cgroup's max_usage_in_bytes) within
// PeakBound, keep the calm pod's series updating, and never give one pod's identity to
// another's cgroups or processes.
//
// Environment: HOSTILE_EXPORTER (the binary; default bin/quota_exporter), HOSTILE_DURATION
// (default 3m; make test-hostile runs 90s), HOSTILE_CLASSES (comma-separated class names,
// "all" (default) or "none": the calm node alone), HOSTILE_GOPAUSE=0 (no second exporter
// with --collector.gopause), HOSTILE_REPORT (a file for the Markdown summary).
package hostile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/benchnode"
	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// PeakBound is the most memory the exporter may use on a hostile node: its memory cgroup's
// peak usage (RSS and the page cache charged to it), docs/performance.md's figure. With every
// class at once (300 pods, ~19 000 series, 7 MB responses, 200 clients that never read) it
// peaked at 120.6–124.4 MiB; the bound leaves the DaemonSet's 256 MiB limit 96 MiB of room.
const PeakBound = 160 << 20

// TenantSeriesBound is the most series one pod may have in a scrape, whatever it plants:
// the default --budget.series-per-tenant (docs/security.md).
const TenantSeriesBound = 2000

func TestMain(m *testing.M) {
	if os.Getenv("HOSTILE_CHILD") == "burn" {
		burn()
	}
	os.Exit(m.Run())
}

// burn is the calm pod's workload: two threads spin 60 ms every 2 s against its 0.5-core
// quota, so it is throttled in every burst and its usage grows, at ~6% of a core.
func burn() {
	for {
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for end := time.Now().Add(60 * time.Millisecond); time.Now().Before(end); {
				}
			}()
		}
		wg.Wait()
		time.Sleep(2 * time.Second)
	}
}

// selectClasses parses HOSTILE_CLASSES.
func selectClasses(t *testing.T) []Class {
	v := os.Getenv("HOSTILE_CLASSES")
	switch v {
	case "", "all":
		return Classes
	case "none":
		return nil
	}
	var out []Class
	for _, name := range strings.Split(v, ",") {
		i := slices.IndexFunc(Classes, func(c Class) bool { return c.Name == strings.TrimSpace(name) })
		if i < 0 {
			t.Fatalf("HOSTILE_CLASSES: no class %q", name)
		}
		out = append(out, Classes[i])
	}
	return out
}

// run is one exporter's scrapes.
type run struct {
	e       *Exporter
	scrapes []*Scrape
	reports []*Report
}

func TestHostileNode(t *testing.T) {
	reason := benchnode.CheckHost()
	testenv.Require(t, reason == "", reason)
	testenv.Require(t, !benchnode.Unified(), "needs cgroup v1 (the memory cgroup's oom_control and max_usage_in_bytes)")
	bin := os.Getenv("HOSTILE_EXPORTER")
	if bin == "" {
		bin = filepath.Join(testenv.RepoRoot(), "bin", "quota_exporter")
	}
	_, err := os.Stat(bin)
	testenv.Require(t, err == nil, "no exporter binary at "+bin+" (make build)")
	duration := 3 * time.Minute
	if v := os.Getenv("HOSTILE_DURATION"); v != "" {
		if duration, err = time.ParseDuration(v); err != nil {
			t.Fatalf("HOSTILE_DURATION: %v", err)
		}
	}
	classes := selectClasses(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	node, err := NewNode(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := node.Close(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	calm, err := node.NewPod("calm", 50000, 256<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	burner, err := node.Start(calm.Ctr.Cgroup, "", []string{self}, "HOSTILE_CHILD=burn")
	if err != nil {
		t.Fatal(err)
	}
	h := &Harness{t: t, Node: node, Checker: NewChecker(node, calm, burner.Process.Pid), logf: t.Logf}
	var names []string
	for _, c := range classes {
		names = append(names, c.Name)
		if c.Plant == nil {
			continue
		}
		begin := time.Now()
		if err := c.Plant(h); err != nil {
			t.Fatalf("planting %s: %v", c.Name, err)
		}
		t.Logf("planted %s in %.1fs: %s", c.Name, time.Since(begin).Seconds(), c.Doc)
	}
	if len(names) == 0 {
		names = []string{"none (calm node)"}
	}

	begin := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := startExporters(ctx, t, h, bin, begin)
	t.Logf("exporters ready after %.1fs; classes %s; scraping every %v for %v", time.Since(begin).Seconds(), strings.Join(names, ", "), ScrapeInterval, duration)

	var bg sync.WaitGroup
	for _, c := range classes {
		if c.Run != nil {
			bg.Add(1)
			go func() { defer bg.Done(); c.Run(ctx, h) }()
		}
	}
	var scrapers sync.WaitGroup
	end := time.Now().Add(duration)
	for _, r := range runs {
		scrapers.Add(1)
		go func() {
			defer scrapers.Done()
			scrapeLoop(ctx, t, h, r, begin, end)
		}()
	}
	scrapers.Wait()
	cancel()
	bg.Wait()
	h.Answer() // the stuck reads return before the exporters are stopped
	for _, r := range runs {
		// With --collector.gopause the exit takes long: the kernel releases each uprobe under a
		// global mutex after an RCU tasks-trace grace period (docs/reliability.md).
		t0 := time.Now()
		r.e.Stop()
		t.Logf("%s exporter stopped in %s", r.e.Name, time.Since(t0).Round(time.Millisecond))
	}
	summary := summarize(runs, names, bin, duration, h.Checker.ctlCount > 0)
	if h.pidReuse != nil {
		summary += fmt.Sprintf("\npidreuse: %d processes started in the reuse pod, %d of them on a pid the churn pod had just used\n",
			h.pidReuse.spawned, h.pidReuse.taken)
	}
	t.Log(summary)
	if path := os.Getenv("HOSTILE_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(summary), 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, r := range runs {
		assertRun(t, h, r)
	}
}

// startExporters starts the exporter with the DaemonSet's arguments (its paths are the host's
// here), watching this node's cgroups only (other tests on this host come and go), and once
// more with --collector.gopause unless HOSTILE_GOPAUSE=0; it waits until they are ready.
func startExporters(ctx context.Context, t *testing.T, h *Harness, bin string, begin time.Time) []*run {
	args := []string{"--path.podlogs=" + h.Node.PodLogs, "--cgroup.include=" + regexp.QuoteMeta(h.Node.Parent) + "(/.*)?"}
	variants := map[string][]string{"default": nil}
	if os.Getenv("HOSTILE_GOPAUSE") != "0" {
		variants["gopause"] = []string{"--collector.gopause"}
	}
	var runs []*run
	for _, name := range []string{"default", "gopause"} {
		extra, ok := variants[name]
		if !ok {
			continue
		}
		e, err := NewExporter(h.Node, name, bin, append(slices.Clone(args), extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(begin); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Stop)
		h.Exporters = append(h.Exporters, e)
		runs = append(runs, &run{e: e})
	}
	for _, e := range h.Exporters {
		if err := e.WaitReady(ctx, time.Minute); err != nil {
			t.Fatalf("%v\n%s", err, e.LogTail(3000))
		}
	}
	return runs
}

// scrapeLoop scrapes one exporter every ScrapeInterval until end and checks each scrape.
func scrapeLoop(ctx context.Context, t *testing.T, h *Harness, r *run, begin, end time.Time) {
	client := newClient()
	for next := time.Now(); next.Before(end); next = next.Add(ScrapeInterval) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		s := scrapeOnce(ctx, client, r.e.Addr, begin)
		hwm := r.e.NoteHWM()
		_, starts := r.e.Exits()
		var rep *Report
		if s.Err == nil {
			rep = h.Checker.Check(r.e.Name, starts, s.Samples)
		}
		s.Samples = nil // what the checks need is in the report
		r.scrapes = append(r.scrapes, s)
		r.reports = append(r.reports, rep)
		mem := r.e.MemStats()
		line := fmt.Sprintf("t=%4.0fs %s: ", s.At.Seconds(), r.e.Name)
		if rep == nil {
			line += fmt.Sprintf("FAILED after %.2fs: %v", s.Duration.Seconds(), s.Err)
		} else {
			line += fmt.Sprintf("%d in %.2fs, %d samples, %d bytes; stuck reads %.0f", s.Status, s.Duration.Seconds(), rep.Samples, s.Bytes, rep.StuckReads)
			if rep.CalmStale != "" {
				line += "; " + rep.CalmStale
			}
			if n := len(rep.Identity) + len(rep.Processes) + len(rep.Duplicates); n > 0 {
				line += fmt.Sprintf("; %d identity, %d process, %d duplicate findings", len(rep.Identity), len(rep.Processes), len(rep.Duplicates))
			}
		}
		t.Logf("%s; memcg peak %.1f MiB, VmHWM %.1f MiB, oom_kill %d", line, float64(mem.PeakBytes)/(1<<20), hwm, mem.OOMKills)
	}
}

// summarize is the run's figures as Markdown.
func summarize(runs []*run, classes []string, bin string, d time.Duration, ctlPlanted bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nhostile node: classes %s; %v; exporter %s\n\n", strings.Join(classes, ", "), d, bin)
	b.WriteString("| exporter | starts | exits, first at | OOM kills | scrapes on time | slowest | memcg peak | VmHWM | failcnt | samples (max) | stuck reads (max) | calm pod updated | identity / process / duplicate findings | control-character cgroups distinct |\n")
	b.WriteString("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n")
	for _, r := range runs {
		exits, starts := r.e.Exits()
		first := "-"
		if len(exits) > 0 {
			first = fmt.Sprintf("%.0f s", exits[0].At.Seconds())
		}
		mem := r.e.MemStats()
		ok, slowest := 0, time.Duration(0)
		samples, stuck, calmOK, calmN, ident, procs, dups, ctl := 0, 0.0, 0, 0, 0, 0, 0, -1
		for i, s := range r.scrapes {
			if s.OK() {
				ok++
			}
			slowest = max(slowest, s.Duration)
			rep := r.reports[i]
			if rep == nil {
				calmN++
				continue
			}
			samples, stuck = max(samples, rep.Samples), max(stuck, rep.StuckReads)
			calmN++
			if rep.CalmStale == "" {
				calmOK++
			}
			ident, procs, dups = ident+len(rep.Identity), procs+len(rep.Processes), dups+len(rep.Duplicates)
			ctl = rep.CtlDistinct
		}
		ctlText := "-"
		if ctl >= 0 && ctlPlanted {
			ctlText = fmt.Sprint(ctl)
		}
		fmt.Fprintf(&b, "| %s | %d | %d, %s | %d | %d / %d | %.2f s | %.1f MiB | %.1f MiB | %d | %d | %.0f | %d / %d | %d / %d / %d | %s |\n",
			r.e.Name, starts, len(exits), first, mem.OOMKills, ok, len(r.scrapes), slowest.Seconds(), float64(mem.PeakBytes)/(1<<20),
			r.e.NoteHWM(), mem.FailCnt, samples, stuck, calmOK, calmN, ident, procs, dups, ctlText)
	}
	for _, r := range runs {
		if last := lastReport(r); last != nil && len(last.PerPod) > 0 {
			pods := make([]string, 0, len(last.PerPod))
			for p := range last.PerPod {
				pods = append(pods, p)
			}
			sort.Slice(pods, func(i, j int) bool { return last.PerPod[pods[i]] > last.PerPod[pods[j]] })
			var top []string
			for _, p := range pods[:min(len(pods), 12)] {
				top = append(top, fmt.Sprintf("%s %d", p, last.PerPod[p]))
			}
			fmt.Fprintf(&b, "\n%s, samples per pod (last good scrape, %d pods, the largest): %s\n", r.e.Name, len(pods), strings.Join(top, ", "))
		}
	}
	return b.String()
}

func lastReport(r *run) *Report {
	for i := len(r.reports) - 1; i >= 0; i-- {
		if r.reports[i] != nil {
			return r.reports[i]
		}
	}
	return nil
}

// assertRun fails the test for everything the exporter must keep on a hostile node.
func assertRun(t *testing.T, h *Harness, r *run) {
	name := r.e.Name
	exits, _ := r.e.Exits()
	for _, x := range exits {
		t.Errorf("%s: exited at %.0f s (OOM-killed: %v): %s", name, x.At.Seconds(), x.OOM, x.Status)
	}
	mem := r.e.MemStats()
	if mem.OOMKills > 0 || mem.FailCnt > 0 {
		t.Errorf("%s: memory cgroup: oom_kill %d, failcnt %d (want 0, 0)", name, mem.OOMKills, mem.FailCnt)
	}
	if mem.PeakBytes > PeakBound {
		t.Errorf("%s: peak memory %.1f MiB above the documented bound of %d MiB", name, float64(mem.PeakBytes)/(1<<20), PeakBound>>20)
	}
	if len(r.scrapes) == 0 {
		t.Errorf("%s: no scrape", name)
	}
	var late, stale, gather []string
	findings := map[string][]string{} // kind -> distinct findings, in order
	seen := map[string]bool{}
	note := func(kind string, list []string) {
		for _, f := range list {
			if !seen[kind+f] {
				seen[kind+f] = true
				findings[kind] = append(findings[kind], f)
			}
		}
	}
	ctl := h.Checker.ctlCount
	maxPerPod := map[string]int{}
	for i, s := range r.scrapes {
		at := fmt.Sprintf("t=%.0fs", s.At.Seconds())
		if !s.OK() {
			late = append(late, fmt.Sprintf("%s %.2fs: %v", at, s.Duration.Seconds(), s.Err))
		}
		rep := r.reports[i]
		if rep == nil {
			continue
		}
		if rep.CalmStale != "" {
			stale = append(stale, at+" "+rep.CalmStale)
		}
		if rep.GatherErrors > 0 {
			gather = append(gather, fmt.Sprintf("%s %.0f", at, rep.GatherErrors))
		}
		note("series carrying another pod's identity", rep.Identity)
		note("process series that are not the process the node ran there", rep.Processes)
		note("duplicate series", rep.Duplicates)
		for pod, n := range rep.PerPod {
			maxPerPod[pod] = max(maxPerPod[pod], n)
		}
		if ctl > 0 && rep.CtlDistinct != ctl {
			note("control characters", []string{fmt.Sprintf("%d cgroups named alike but for a control character exported as %d distinct cgroups", ctl, rep.CtlDistinct)})
		}
	}
	for pod, n := range maxPerPod {
		if n > TenantSeriesBound {
			note("pods above the per-tenant series bound", []string{fmt.Sprintf("pod %s: up to %d series in a scrape (bound %d)", pod, n, TenantSeriesBound)})
		}
	}
	kinds := make([]string, 0, len(findings))
	for k := range findings {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		list := findings[k]
		t.Errorf("%s: %d %s, e.g.:\n  %s", name, len(list), k, strings.Join(list[:min(len(list), 3)], "\n  "))
	}
	if len(late) > 0 {
		t.Errorf("%s: %d of %d scrapes failed or took longer than %v: %s", name, len(late), len(r.scrapes), ScrapeTimeout, strings.Join(late, "; "))
	}
	if len(stale) > 0 {
		t.Errorf("%s: the calm pod's series did not update in %d scrapes: %s", name, len(stale), strings.Join(stale, "; "))
	}
	if len(gather) > 0 {
		t.Errorf("%s: promhttp_metric_handler_errors_total{cause=\"gathering\"} (a series dropped from the scrape): %s", name, strings.Join(gather, "; "))
	}
	if t.Failed() {
		t.Logf("%s's log (%s), last lines:\n%s", name, r.e.Log, r.e.LogTail(4000))
	}
}
