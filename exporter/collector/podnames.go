//go:build linux

package collector

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/kubenames"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

func init() {
	addFlags(func(app *kingpin.Application, f *Flags) {
		app.Flag("path.podlogs", "The host's /var/log: the kubelet's pods/ and containers/ directories there name the pods and containers (namespace, pod, container labels). Only directory names are read. Empty: no names.").Default("/var/log").StringVar(&f.cfg.PodLogsPath)
	})
}

var (
	podNamesRefreshesDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_kubenames_refreshes_total",
		"quota_exporter: re-reads of the kubelet's log directories (--path.podlogs) that name pods and containers.", nil, nil))
	podNamesReadErrorsDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_kubenames_read_errors_total",
		"quota_exporter: failed reads of <podlogs>/pods or <podlogs>/containers (the names read before are kept).", nil, nil))
	podNamesMalformedDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_kubenames_malformed_entries_total",
		"quota_exporter: entries of the kubelet's log directories skipped because their names are not kubelet names.", nil, nil))
	podNamesTruncatedDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_kubenames_truncated_entries_total",
		"quota_exporter: entries dropped because the directories held more than the resolver keeps.", nil, nil))
	podNamesEntriesDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_kubenames_entries",
		"quota_exporter: pods and containers the exporter can name.", []string{"kind"}, nil))
)

// PodNames gives cgroups their Kubernetes names (namespace, pod, container) from the
// kubelet's log directories, tells pods' sandboxes from their containers, and exports the
// resolver's counters. The resolver refreshes on its own clock (one readdir of each directory
// every 30 s, sooner after a miss).
type PodNames struct {
	r        *kubenames.Resolver
	procPath string
	// sandboxes are the container cgroups found to be sandboxes (by path), kept while
	// discovery lists them: a sandbox stays one.
	sandboxes map[string]bool
}

// newPodNames returns nil when podLogs is "": no names.
func newPodNames(podLogs, procPath string) *PodNames {
	if podLogs == "" {
		return nil
	}
	return &PodNames{r: kubenames.New(podLogs, kubenames.Options{}), procPath: procPath, sandboxes: map[string]bool{}}
}

// Name fills each cgroup's Kubernetes names from its container id or, for pod-level cgroups
// and sandboxes, its pod UID. Called by one walk at a time.
func (n *PodNames) Name(cgs []cgroupid.Cgroup) {
	seen := make(map[string]bool, len(n.sandboxes))
	for i := range cgs {
		cg := &cgs[i]
		// A container of a pod the kubelet knows that it has not linked: the sandbox?
		if n.NameCgroup(cg) && cg.Kind == cgroupid.KindContainer && cg.Names.Container == "" && n.isSandbox(cg) {
			cg.Kind = cgroupid.KindSandbox
			seen[cg.Path] = true
		}
	}
	for p := range n.sandboxes {
		if !seen[p] {
			delete(n.sandboxes, p)
		}
	}
}

// NameCgroup fills one cgroup's names from its container id or, for pod-level cgroups and
// sandboxes, its pod UID; it reports whether they were found.
func (n *PodNames) NameCgroup(cg *cgroupid.Cgroup) bool {
	id := cg.Identity
	if id.ContainerID != "" && cg.Kind != cgroupid.KindSandbox {
		if c, ok := n.r.Container(id.ContainerID, id.PodUID); ok {
			cg.Names = cgroupid.KubeNames{Namespace: c.Namespace, Pod: c.Pod, Container: c.Name}
			return true
		}
	}
	if id.PodUID == "" {
		return false
	}
	p, ok := n.r.Pod(id.PodUID)
	if ok {
		cg.Names = cgroupid.KubeNames{Namespace: p.Namespace, Pod: p.Name}
	}
	return ok
}

// isSandbox tells the pod's sandbox (pause, or CRI-O's infra container) from a container
// the kubelet has not linked yet. The kubelet links every container it starts in
// <podlogs>/containers, never the sandbox; it links a container only after the runtime
// started it, so an unlinked container cgroup of a pod the kubelet knows is the sandbox when
// what runs in it is the pause process: every process the exporter sees there is named
// "pause", or it sees none (CRI-O's cgroup for a dropped infra container is empty, and outside
// the host's PID namespace no process is seen). A tenant that names its own process "pause"
// is taken for a sandbox only until the kubelet links it, and harms no one else.
func (n *PodNames) isSandbox(cg *cgroupid.Cgroup) bool {
	if n.sandboxes[cg.Path] {
		return true
	}
	for _, pid := range cg.PIDs {
		ctx, cancel := context.WithTimeout(context.Background(), sandboxCommBudget)
		comm, err := procread.ReadFile(ctx, filepath.Join(n.procPath, strconv.Itoa(pid), "comm"), 64)
		cancel()
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return false // unknown: decided again next walk
		}
		if err == nil && strings.TrimSuffix(string(comm), "\n") != "pause" {
			return false
		}
	}
	n.sandboxes[cg.Path] = true
	return true
}

// sandboxCommBudget bounds the read of one process's comm (a kernel string, answered at once).
const sandboxCommBudget = 500 * time.Millisecond

// SandboxContainer is the container name a sandbox's series carry, as cAdvisor and CRI-O
// name the infra container: kubernetes-mixin's container!="" and container!="POD" tell it
// from the pod's containers, and the pod's own cgroup carries no container label.
const SandboxContainer = "POD"

// Describe and Collect export the resolver's counters (nil: none).
func (n *PodNames) Describe(ch chan<- *prometheus.Desc) {
	if n == nil {
		return
	}
	for _, d := range []*prometheus.Desc{podNamesRefreshesDesc, podNamesReadErrorsDesc, podNamesMalformedDesc, podNamesTruncatedDesc, podNamesEntriesDesc} {
		ch <- d
	}
}

func (n *PodNames) Collect(ch chan<- prometheus.Metric) {
	if n == nil {
		return
	}
	st := n.r.Stats()
	ch <- prometheus.MustNewConstMetric(podNamesRefreshesDesc, prometheus.CounterValue, float64(st.Refreshes))
	ch <- prometheus.MustNewConstMetric(podNamesReadErrorsDesc, prometheus.CounterValue, float64(st.ReadErrors))
	ch <- prometheus.MustNewConstMetric(podNamesMalformedDesc, prometheus.CounterValue, float64(st.Malformed))
	ch <- prometheus.MustNewConstMetric(podNamesTruncatedDesc, prometheus.CounterValue, float64(st.Truncated))
	ch <- prometheus.MustNewConstMetric(podNamesEntriesDesc, prometheus.GaugeValue, float64(st.Pods), "pod")
	ch <- prometheus.MustNewConstMetric(podNamesEntriesDesc, prometheus.GaugeValue, float64(st.Containers), "container")
}
