package hostile

import (
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Checker holds the node's ground truth (which pods exist, which processes the node started
// where and when) and checks each scrape against it.
type Checker struct {
	node    *Node
	calm    *Pod
	calmPID int
	// byIdentity finds a pod by any of its identity label values; byUID by its UID.
	byIdentity map[string]*Pod
	byUID      map[string]*Pod
	// ctl: cgroups named alike but for a control character, planted below ctlParent.
	ctlParent string
	ctlCount  int
	// markers: a process name only the processes of one cgroup have.
	markers map[string]string

	prev map[string]calmState // by exporter
}

// calmState is what the last good scrape showed of the calm pod.
type calmState struct {
	start          int // the exporter process (its histograms restart with it)
	usage, windows float64
}

// Report is what one scrape showed.
type Report struct {
	Samples    int
	Duplicates []string // series sent more than once
	// The calm pod: its CPU usage (the kernel's counter), the sampler's windows, its process.
	CalmUsage, CalmWindows float64
	CalmSeries, CalmProc   bool
	CalmStale              string // why its series did not move since the last good scrape
	Identity               []string
	Processes              []string
	CtlDistinct            int
	StuckReads             float64
	GatherErrors           float64
	PerPod                 map[string]int
}

// NewChecker knows the node, its calm pod and process, and every pod.
func NewChecker(n *Node, calm *Pod, calmPID int) *Checker {
	c := &Checker{node: n, calm: calm, calmPID: calmPID, byIdentity: map[string]*Pod{}, byUID: map[string]*Pod{}, prev: map[string]calmState{}}
	c.AddPod(calm)
	return c
}

// AddPod adds a pod whose identity labels must stay on its own cgroups.
func (c *Checker) AddPod(p *Pod) {
	for _, v := range []string{"pod_uid=" + p.UID, "pod=" + p.Name, "container_id=containerd://" + p.Ctr.ID} {
		c.byIdentity[v] = p
	}
	c.byUID[p.UID] = p
}

// podOf is the pod whose cgroup subtree holds cgroup label cg (by the path's pod segment).
func (c *Checker) podOf(cg string) *Pod {
	rest, ok := strings.CutPrefix(cg, c.node.Parent+"/kubepods/burstable/pod")
	if !ok {
		return nil
	}
	uid, _, _ := strings.Cut(rest, "/")
	return c.byUID[uid]
}

// maxLabel and castagnoli: the exporter's documented rule for label values (docs/metrics.md):
// invalid UTF-8, control and format characters become U+FFFD, and a value longer than 256
// bytes keeps its first bytes, then "…" and the CRC-32C of the whole value in 8 hex digits.
const maxLabel = 256

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// clean applies that rule, to compare a planted cgroup path with its label.
func clean(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	c := b.String()
	if len(c) <= maxLabel {
		return c
	}
	suffix := fmt.Sprintf("…%08x", crc32.Checksum([]byte(s), castagnoli))
	cut := maxLabel - len(suffix)
	for cut > 0 && !utf8.RuneStart(c[cut]) {
		cut--
	}
	return c[:cut] + suffix
}

// within tells whether cgroup label cg is path or below it (a capped label keeps its
// first bytes).
func within(cg, path string) bool {
	p := clean(path)
	if cg == p || strings.HasPrefix(cg, p+"/") {
		return true
	}
	i := strings.LastIndex(cg, "…")
	return i > 0 && len(cg)-i == len("…")+8 && strings.HasPrefix(p+"/", cg[:i])
}

// under tells whether cgroup label cg names the cgroup path or one of its ancestors.
func under(path, cg string) bool {
	p := clean(path)
	if p == cg || strings.HasPrefix(p, cg+"/") {
		return true
	}
	// Names that clean alike are told apart by an ordinal (" #2", tenantstr.Unique), given in
	// the walk's order: the label may be any of the colliding cgroups'.
	base, ok := withoutOrdinal(cg)
	return ok && (p == base || strings.HasPrefix(p, base+"/"))
}

// withoutOrdinal cuts the " #<n>" tenantstr.Unique appends to a label value.
func withoutOrdinal(label string) (string, bool) {
	i := strings.LastIndex(label, " #")
	if i < 0 {
		return label, false
	}
	if _, err := strconv.Atoi(label[i+2:]); err != nil {
		return label, false
	}
	return label[:i], true
}

// Check checks one good scrape of exporter name (its start-th process).
func (c *Checker) Check(name string, start int, samples []Sample) *Report {
	r := &Report{Samples: len(samples), PerPod: map[string]int{}}
	seen := make(map[string]bool, len(samples))
	procName := map[string]string{} // cgroup \x00 process -> pid, from quota_process_info
	starts := map[string]float64{}  // cgroup \x00 process -> start time
	ctl := map[string]bool{}
	calmCg := clean(c.calm.Ctr.Cgroup)
	for _, s := range samples {
		if seen[s.Series] {
			r.Duplicates = append(r.Duplicates, s.Series)
		}
		seen[s.Series] = true
		cg, hasCg := s.Labels["cgroup"]
		switch s.Name {
		case "quota_exporter_stuck_reads":
			r.StuckReads += s.Value
		case "promhttp_metric_handler_errors_total":
			if s.Labels["cause"] == "gathering" {
				r.GatherErrors = s.Value
			}
		}
		if !hasCg {
			continue
		}
		if p := c.podOf(cg); p != nil {
			r.PerPod[p.Ctr.Name]++
		}
		for _, l := range []string{"pod_uid", "pod", "container_id"} {
			p := c.byIdentity[l+"="+s.Labels[l]]
			if p != nil && !within(cg, p.Cgroup) {
				r.Identity = append(r.Identity, fmt.Sprintf("%s{cgroup=%q} carries pod %s's identity (pod_uid=%q pod=%q container_id=%q)",
					s.Name, cg, p.Name, s.Labels["pod_uid"], s.Labels["pod"], s.Labels["container_id"]))
				break
			}
		}
		switch s.Name {
		case "quota_cpu_usage_seconds_total":
			if cg == calmCg {
				r.CalmUsage += s.Value
				r.CalmSeries = true
			}
		case "quota_cpu_throttled_window_ratio_count":
			if cg == calmCg {
				r.CalmWindows = s.Value
			}
		case "quota_cpu_limit_cores":
			if c.ctlParent != "" && within(cg, c.ctlParent) && cg != clean(c.ctlParent) {
				ctl[cg] = true
			}
		case "quota_process_info":
			for m, owner := range c.markers {
				if p := s.Labels["process"]; (p == m || strings.HasPrefix(p, m+" ")) && cg != clean(owner) {
					r.Processes = append(r.Processes, fmt.Sprintf("pid %s exported in cgroup %q as %q, the name of another cgroup's processes", s.Labels["pid"], cg, p))
				}
			}
			pid, _ := strconv.Atoi(s.Labels["pid"])
			procName[cg+"\x00"+s.Labels["process"]] = s.Labels["pid"]
			if cg == calmCg && pid == c.calmPID {
				r.CalmProc = true
			}
		case "quota_process_start_time_seconds":
			starts[cg+"\x00"+s.Labels["process"]] = s.Value
		}
	}
	r.CtlDistinct = len(ctl)
	// Every process series names a process the node started in that cgroup, with its start
	// time: a reused pid must not carry another process's cgroup or start.
	keys := make([]string, 0, len(procName))
	for k := range procName {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cg, proc, _ := strings.Cut(k, "\x00")
		pid, _ := strconv.Atoi(procName[k])
		start, hasStart := starts[k]
		// A process in a cgroup below a container is the container's: its label may name
		// the container or the cgroup itself.
		var ofCgroup []Owner
		for _, o := range c.node.Owners(pid) {
			if under(o.Cgroup, cg) {
				ofCgroup = append(ofCgroup, o)
			}
		}
		switch {
		case len(ofCgroup) == 0:
			r.Processes = append(r.Processes, fmt.Sprintf("pid %d (%q) exported in cgroup %q, where no process of that pid ran", pid, proc, cg))
		case hasStart:
			ok := false
			for _, o := range ofCgroup {
				ok = ok || math.Abs(o.Start-start) <= 1.5
			}
			if !ok {
				r.Processes = append(r.Processes, fmt.Sprintf("pid %d (%q) in cgroup %q exported with start %.0f; the process of that pid there started at %.0f (pid reused)",
					pid, proc, cg, start, ofCgroup[len(ofCgroup)-1].Start))
			}
		}
	}
	// The calm pod keeps updating: its usage grows (the burner runs every 2 s) and the
	// sampler's window count grows, scrape after scrape of the same process.
	prev, had := c.prev[name]
	switch {
	case !r.CalmSeries || !r.CalmProc:
		r.CalmStale = fmt.Sprintf("calm pod's series missing (cpu usage %v, process %v)", r.CalmSeries, r.CalmProc)
	case had && r.CalmUsage <= prev.usage:
		r.CalmStale = fmt.Sprintf("calm pod's CPU usage did not grow (%.3f -> %.3f s)", prev.usage, r.CalmUsage)
	case had && prev.start == start && r.CalmWindows <= prev.windows:
		r.CalmStale = fmt.Sprintf("calm pod's throttle windows did not grow (%.0f -> %.0f)", prev.windows, r.CalmWindows)
	}
	if r.CalmSeries {
		c.prev[name] = calmState{start: start, usage: r.CalmUsage, windows: r.CalmWindows}
	}
	return r
}
