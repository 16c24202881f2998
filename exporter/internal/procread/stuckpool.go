package procread

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Pool is a ceiling on the reads of one kind of file that their callers gave up on and that
// have not returned, each an OS thread blocked in the kernel, shared out per tenant. Two
// exist, so that what a tenant can make block never refuses what it cannot:
//
//   - CgroupFiles: the kernel's cgroup files (discovery, the cgroup collectors, the throttle
//     sampler). No tenant controls whether they block; MaxStuck of them node-wide.
//   - ProcessFiles: a process's /proc files and what lies below its root. A tenant makes them
//     block (a page fault on its own FUSE or NFS mount holds the process's mmap_lock; its
//     perf data on such a mount never answers), so each tenant may hold only its budget of
//     them, under a node-wide ceiling (budget.Defaults().StuckReads).
//
// At the ceiling every new read of the pool is refused at once with ErrOverloaded, and the
// other pool's reads go on. Per tenant, a read run by Map with Budget.Tenant takes one of the
// tenant's budget of slots for as long as it is in the kernel: a read that finds every slot
// held by reads still running waits for one (a tenant runs at most its budget of reads at
// once), and one that finds them all held by stuck reads is refused at once with
// ErrTenantOverloaded. So a tenant never holds more stuck reads than its budget, and the
// other tenants' reads go on.
type Pool struct {
	name      string
	node      atomic.Int64 // ceiling; 0: none
	perTenant atomic.Int64 // budget per tenant; 0: none
	stuck     atomic.Int64

	mu      sync.Mutex
	tenants map[string]*tenantReads

	refused  atomic.Pointer[func(tenant, reason string)]
	nRefused [2]atomic.Uint64 // by reason: tenant, node
}

// tenantReads are one tenant's reads in the kernel: running holds the slots taken (stuck
// reads included), stuck those given up; wake is closed when a slot frees.
type tenantReads struct {
	running, stuck int
	wake           chan struct{}
}

// The two pools (see Pool).
var (
	CgroupFiles  = NewPool("cgroup files", MaxStuck, 0)
	ProcessFiles = NewPool("process files", MaxStuck, 8)
)

// NewPool makes a pool with a node-wide ceiling and a budget per tenant (0: none).
func NewPool(name string, node, perTenant int) *Pool {
	p := &Pool{name: name, tenants: map[string]*tenantReads{}}
	p.SetLimits(node, perTenant)
	return p
}

// SetLimits changes the ceiling and the per-tenant budget (0: none); reads already stuck
// stay counted.
func (p *Pool) SetLimits(node, perTenant int) {
	p.node.Store(int64(max(node, 0)))
	p.perTenant.Store(int64(max(perTenant, 0)))
}

// Limits are the ceiling and the per-tenant budget.
func (p *Pool) Limits() (node, perTenant int) {
	return int(p.node.Load()), int(p.perTenant.Load())
}

// OnRefuse makes f hear of every refused read: the tenant ("" for reads without one) and
// the reason, "tenant" or "node" (the budget counters and log). f must not block; nil stops.
func (p *Pool) OnRefuse(f func(tenant, reason string)) {
	if f == nil {
		p.refused.Store(nil)
		return
	}
	p.refused.Store(&f)
}

// Stuck is the number of the pool's stuck reads that have not returned.
func (p *Pool) Stuck() int { return int(p.stuck.Load()) }

// AtBudget lists the tenants whose stuck reads fill their budget, with the count.
func (p *Pool) AtBudget() map[string]int {
	budget := int(p.perTenant.Load())
	if budget == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out map[string]int
	for t, r := range p.tenants {
		if r.stuck >= budget {
			if out == nil {
				out = map[string]int{}
			}
			out[t] = r.stuck
		}
	}
	return out
}

// ErrTenantOverloaded is returned, without reading, for a read of a tenant whose stuck reads
// fill its budget. It wraps ErrStuck: like a stuck key it is not counted as a new
// timeout (the budget counters count it).
var ErrTenantOverloaded = fmt.Errorf("%w: this tenant's stuck reads fill its budget", ErrStuck)

// admit returns nil when a read of tenant may start without a slot of its own (a read
// inside one that holds the slot, or one without a tenant). Nothing is locked while the pool
// has no stuck read, the usual case.
func (p *Pool) admit(tenant string) error {
	n := p.stuck.Load()
	if n == 0 {
		return nil
	}
	if node := p.node.Load(); node > 0 && n >= node {
		p.refuse(tenant, 1)
		return fmt.Errorf("%s: %w", p.name, ErrOverloaded)
	}
	budget := int(p.perTenant.Load())
	if budget == 0 || tenant == "" {
		return nil
	}
	p.mu.Lock()
	r := p.tenants[tenant]
	full := r != nil && r.stuck >= budget
	p.mu.Unlock()
	if full {
		p.refuse(tenant, 0)
		return ErrTenantOverloaded
	}
	return nil
}

// take admits a read of tenant and takes one of its slots, waiting while they are all held
// by reads still running (until ctx ends: ErrTimeout). release gives the slot back once the
// read has returned; without a tenant or budget it is a no-op.
func (p *Pool) take(ctx context.Context, tenant string) (release func(), err error) {
	if err := p.admit(tenant); err != nil {
		return nil, err
	}
	budget := int(p.perTenant.Load())
	if budget == 0 || tenant == "" {
		return func() {}, nil
	}
	p.mu.Lock()
	for {
		r := p.tenants[tenant]
		if r == nil {
			r = &tenantReads{}
			p.tenants[tenant] = r
		}
		if r.stuck >= budget {
			p.mu.Unlock()
			p.refuse(tenant, 0)
			return nil, ErrTenantOverloaded
		}
		if r.running < budget {
			r.running++
			p.mu.Unlock()
			return func() { p.release(tenant) }, nil
		}
		if r.wake == nil {
			r.wake = make(chan struct{})
		}
		wake := r.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for one of the tenant's %d reads in the kernel: %w", budget, ErrTimeout)
		}
		p.mu.Lock()
	}
}

// release frees one of tenant's slots. p.mu not held.
func (p *Pool) release(tenant string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.tenants[tenant]
	if r == nil {
		return
	}
	r.running--
	p.wakeUp(tenant, r)
}

// wakeUp tells the reads waiting for one of tenant's slots that something changed, and
// forgets a tenant with nothing in the kernel. p.mu held.
func (p *Pool) wakeUp(tenant string, r *tenantReads) {
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
	if r.running <= 0 && r.stuck <= 0 {
		delete(p.tenants, tenant)
	}
}

func (p *Pool) refuse(tenant string, reason int) {
	p.nRefused[reason].Add(1)
	if f := p.refused.Load(); f != nil {
		(*f)(tenant, [2]string{"tenant", "node"}[reason])
	}
}

// gaveUp counts one read of tenant that its caller gave up on.
func (p *Pool) gaveUp(tenant string) {
	p.stuck.Add(1)
	if tenant != "" {
		p.mu.Lock()
		r := p.tenants[tenant]
		if r == nil {
			r = &tenantReads{}
			p.tenants[tenant] = r
		}
		r.stuck++
		p.wakeUp(tenant, r) // its waiters are refused now if it is full
		p.mu.Unlock()
	}
}

// returned uncounts a stuck read that has returned.
func (p *Pool) returned(tenant string) {
	if tenant != "" {
		p.mu.Lock()
		if r := p.tenants[tenant]; r != nil {
			r.stuck--
			p.wakeUp(tenant, r)
		}
		p.mu.Unlock()
	}
	p.stuck.Add(-1)
}

type poolKey struct{}

type poolTenant struct {
	pool   *Pool
	tenant string
}

// WithPool makes the reads run under ctx (ReadFile, ReadAt, Do, GateDo) count against pool
// and tenant ("" : none); without it they count against ProcessFiles, without a tenant.
func WithPool(ctx context.Context, pool *Pool, tenant string) context.Context {
	return context.WithValue(ctx, poolKey{}, poolTenant{pool, tenant})
}

// poolOf is the pool and tenant of ctx's reads.
func poolOf(ctx context.Context) (*Pool, string) {
	if pt, ok := ctx.Value(poolKey{}).(poolTenant); ok && pt.pool != nil {
		return pt.pool, pt.tenant
	}
	return ProcessFiles, ""
}

// String is the pool's name.
func (p *Pool) String() string { return p.name }
