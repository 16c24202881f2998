package benchnode

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Options are one benchmark run over several node sizes.
type Options struct {
	Sizes    []int
	Workload WorkloadOptions // N is set per size
	// Exporters are measured one after the other on the same workload (several builds: a
	// before/after comparison under the same load). Name, Bin, Args; the rest is filled in.
	Exporters    []TargetOptions
	NodeExporter string // binary; "" to skip
	Idle         time.Duration
	Settle       time.Duration
	Scrapes      int
	ScrapeGap    time.Duration
	FloorRepeats int
	Logf         func(format string, args ...any)
}

// SizeResult is everything measured at one N.
type SizeResult struct {
	N            int
	Processes    int // the workload's own
	HostProcs    int // every process on the host during the run
	Floor        *Floor
	Exporters    []*TargetResult
	NodeExporter *TargetResult
	LoadBefore   string // /proc/loadavg
	LoadAfter    string
}

// Run measures every size in turn; each size's workload is removed before the next starts,
// and on error or cancellation (a signal) too.
func Run(ctx context.Context, o Options) ([]*SizeResult, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	var out []*SizeResult
	for _, n := range o.Sizes {
		r, err := runSize(ctx, o, n)
		if err != nil {
			return out, fmt.Errorf("at N=%d: %w", n, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func runSize(ctx context.Context, o Options, n int) (_ *SizeResult, err error) {
	wo := o.Workload
	wo.N, wo.Logf = n, o.Logf
	w, err := NewWorkload(ctx, wo)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := w.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	r := &SizeResult{N: n, Processes: w.Processes, LoadBefore: loadavg()}
	// JVMs start in a few seconds; let them and the cgroups' first periods settle.
	if err := sleep(ctx, o.Settle+3*time.Second); err != nil {
		return nil, err
	}
	if r.Floor, err = MeasureFloor(o.FloorRepeats); err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	r.HostProcs = r.Floor.Processes
	o.Logf("N=%d floor: %.1f ms CPU per scrape (%d files, %d dirs, %d processes), sampler %.2f ms pread / %.2f ms open per window (%d cgroups)",
		n, r.Floor.ScrapeCPUMS, r.Floor.Files, r.Floor.Dirs, r.Floor.Processes, r.Floor.SamplerPreadCPUMS, r.Floor.SamplerOpenCPUMS, r.Floor.QuotaCgroups)
	for _, t := range o.Exporters {
		t.Idle, t.Settle, t.Scrapes, t.ScrapeGap, t.Logf = o.Idle, o.Settle, o.Scrapes, o.ScrapeGap, o.Logf
		t.ContainerPrefix = w.Parent + "/"
		if t.Name == "" {
			t.Name = "quota_exporter"
		}
		if t.ProfileDir != "" {
			t.Name = fmt.Sprintf("%s-N%d", t.Name, n)
		}
		res, err := RunTarget(ctx, t)
		if err != nil {
			return nil, err
		}
		r.Exporters = append(r.Exporters, res)
	}
	if o.NodeExporter != "" {
		ne := TargetOptions{Name: "node_exporter", Bin: o.NodeExporter, Idle: o.Idle, Settle: o.Settle,
			Scrapes: o.Scrapes, ScrapeGap: o.ScrapeGap, Logf: o.Logf}
		if r.NodeExporter, err = RunTarget(ctx, ne); err != nil {
			return nil, err
		}
	}
	r.LoadAfter = loadavg()
	return r, nil
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// WriteMarkdown prints the results as the tables docs/performance.md shows.
func WriteMarkdown(w io.Writer, rs []*SizeResult) {
	fmt.Fprintf(w, "\n%s; nproc %d\n\n", time.Now().UTC().Format(time.RFC3339), runtime.NumCPU())
	fmt.Fprintln(w, "| N | exporter | processes on the host | idle CPU (% of a core) | scrape wall p50 / p99 (ms) | scrape CPU p50 / p99 (ms) | gzip wall p50 / p99 | gzip CPU p50 / p99 | floor CPU per scrape (ms) | CPU p50 / floor | RSS / peak (MiB) | RSS between scrapes p50 / p99 (MiB) | samples | series per container (mean / median) | response plain / gzip | loadavg before → after |")
	fmt.Fprintln(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, r := range rs {
		for _, e := range r.Exporters {
			fmt.Fprintf(w, "| %d | %s | %d | %.2f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.1f | %.1f× | %.1f / %.1f | %.1f / %.1f | %d | %.1f / %d | %s / %s | %s → %s |\n",
				r.N, e.Name, r.HostProcs, e.IdleCPUPercent, e.Plain.WallMS.P50, e.Plain.WallMS.P99, e.Plain.CPUMS.P50, e.Plain.CPUMS.P99,
				e.Gzip.WallMS.P50, e.Gzip.WallMS.P99, e.Gzip.CPUMS.P50, e.Gzip.CPUMS.P99, r.Floor.ScrapeCPUMS,
				e.Plain.CPUMS.P50/r.Floor.ScrapeCPUMS, e.RSSMiB, e.HWMMiB, e.BetweenRSSMiB.P50, e.BetweenRSSMiB.P99, e.Exposition.Samples, e.Exposition.SeriesPerContainer,
				e.Exposition.SeriesPerContainerMedian, size(e.Plain.Bytes), size(e.Gzip.Bytes), r.LoadBefore, r.LoadAfter)
		}
	}
	fmt.Fprintln(w, "\nSampler floor (cpu.stat of every cgroup with a quota, once; ×1/s = % of a core at the default 1 s window):")
	fmt.Fprintln(w, "\n| N | cgroups with quota | pread on open files (ms) | open/read/close (ms) | floor as % of a core at 1/s (pread) | exporter idle / pread floor |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | --- |")
	for _, r := range rs {
		pct := r.Floor.SamplerPreadCPUMS / 10 // ms per 1 s window → % of a core
		var ratios []string
		for _, e := range r.Exporters {
			ratios = append(ratios, fmt.Sprintf("%s %.1f×", e.Name, e.IdleCPUPercent/pct))
		}
		fmt.Fprintf(w, "| %d | %d | %.2f | %.2f | %.2f | %s |\n", r.N, r.Floor.QuotaCgroups, r.Floor.SamplerPreadCPUMS,
			r.Floor.SamplerOpenCPUMS, pct, strings.Join(ratios, ", "))
	}
	fmt.Fprintln(w, "\nEmpty-valued labels (Prometheus treats them as absent):")
	fmt.Fprintln(w, "\n| N | exporter | empty label pairs | their bytes | share of the plain response |")
	fmt.Fprintln(w, "| ---: | --- | ---: | ---: | ---: |")
	for _, r := range rs {
		for _, e := range r.Exporters {
			x := e.Exposition
			fmt.Fprintf(w, "| %d | %s | %d | %s | %.0f%% |\n", r.N, e.Name, x.EmptyLabels, size(x.EmptyLabelBytes), 100*float64(x.EmptyLabelBytes)/float64(max(x.Bytes, 1)))
		}
	}
	if len(rs) > 0 && len(rs[len(rs)-1].Exporters) > 0 {
		x := rs[len(rs)-1].Exporters[0].Exposition
		fmt.Fprintf(w, "\nSeries per container cgroup by metric (N=%d, %s; a family present on only some cgroups counts per cgroup that has it):\n\n",
			rs[len(rs)-1].N, rs[len(rs)-1].Exporters[0].Name)
		fmt.Fprintln(w, "| metric | series per container |")
		fmt.Fprintln(w, "| --- | ---: |")
		var names []string
		for n := range x.PerMetric {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(w, "| %s | %.2f |\n", n, x.PerMetric[n])
		}
	}
	var ne []*SizeResult
	for _, r := range rs {
		if r.NodeExporter != nil {
			ne = append(ne, r)
		}
	}
	if len(ne) > 0 {
		fmt.Fprintln(w, "\nnode_exporter (defaults) on the same node, same run:")
		fmt.Fprintln(w, "\n| N | idle CPU (% of a core) | scrape wall p50 / p99 (ms) | scrape CPU p50 / p99 (ms) | RSS / peak (MiB) | samples | response plain / gzip |")
		fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
		for _, r := range ne {
			e := r.NodeExporter
			fmt.Fprintf(w, "| %d | %.2f | %.0f / %.0f | %.0f / %.0f | %.1f / %.1f | %d | %s / %s |\n", r.N, e.IdleCPUPercent,
				e.Plain.WallMS.P50, e.Plain.WallMS.P99, e.Plain.CPUMS.P50, e.Plain.CPUMS.P99, e.RSSMiB, e.HWMMiB,
				e.Exposition.Samples, size(e.Plain.Bytes), size(e.Gzip.Bytes))
		}
	}
	for _, r := range rs {
		for _, t := range append(r.Exporters, r.NodeExporter) {
			if t != nil && len(t.Errors) > 0 {
				fmt.Fprintf(w, "\nN=%d %s: %s\n", r.N, t.Name, strings.Join(t.Errors, "; "))
			}
		}
	}
}

func size(b int) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MB", float64(b)/1e6)
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d B", b)
}
