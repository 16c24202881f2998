//go:build linux

package processes

import (
	"context"
	"errors"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/goruntime"
	"github.com/quota-exporter/quota_exporter/exporter/internal/jvm"
)

// detector tells whether a process runs one runtime, and its name for the process label
// ("" keeps the comm). It returns runtime "" when the process is not of its runtime.
type detector struct {
	runtime string
	detect  func(ctx context.Context, p *Process) (runtime, name string, err error)
}

// newDetectors is the one place that orders runtime detection. Detection runs once per
// process (pid and start time) whatever collectors are enabled: the runtime label of every
// per-process series depends on it.
func newDetectors(s *Source) []detector {
	return []detector{
		// JVMs first: detecting Go reads the executable's build info, needless for java.
		{RuntimeJVM, s.detectJVM},
		{RuntimeGo, s.detectGo},
	}
}

// detectJVM recognises HotSpot JVMs (java executable) and names them by main class or jar.
// What it read is kept on the process for the jvm collector of the same scrape.
func (s *Source) detectJVM(ctx context.Context, p *Process) (string, string, error) {
	jp := p.JVMProcess(ctx, s.procPath)
	if !jp.IsJVM() {
		return "", "", nil
	}
	info, err := s.JVM.InspectProcess(ctx, jp, s.cgroups.JVMCgroup(p.Cgroup))
	if errors.Is(err, jvm.ErrNotJVM) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	p.jvmInfo = info
	name := info.Main
	if name == "" {
		name = p.Stat.Comm
	}
	return RuntimeJVM, name, nil
}

// detectGo recognises Go binaries by their build info (debug/buildinfo on /proc/<pid>/exe);
// the result serves the go collector until goInfoTTL.
func (s *Source) detectGo(ctx context.Context, p *Process) (string, string, error) {
	info, err := s.InspectGo(ctx, p)
	if err != nil {
		return "", "", err
	}
	if !info.IsGo {
		return "", "", nil
	}
	p.state.goInfo, p.state.goAt = info, time.Now()
	return RuntimeGo, "", nil
}

// InspectGo reads a process's Go build info; the affinity comes from the status discovery
// read, the environment from the source's shared snapshot.
func (s *Source) InspectGo(ctx context.Context, p *Process) (*goruntime.Info, error) {
	return goruntime.InspectKnown(ctx, s.procPath, p.PID, goruntime.Known{
		Affinity: p.Status.Affinity, AffinityErr: p.Status.AffinityErr,
		Env:    func() (map[string]string, error) { return s.Environ(ctx, p) },
		Builds: s.GoBuilds,
	}, processQuota(p))
}

// processQuota is the CPU quota of the process's own cgroup, which is what the Go runtime
// and automaxprocs read.
func processQuota(p *Process) goruntime.CPUQuota {
	m := p.Cgroup.CPUMax // read by discovery
	if !p.Cgroup.HasCPUMax || !m.Limited() {
		return goruntime.CPUQuota{}
	}
	return goruntime.CPUQuota{QuotaUS: m.QuotaUS, PeriodUS: int64(m.PeriodUS)}
}
