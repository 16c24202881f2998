package procread

import "sort"

// Exported for tests only: the product code does not use these.

// StuckKeys lists the stuck keys, sorted (for logs and tests).
func (g *Gate) StuckKeys() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for k, o := range g.busy {
		if o.stuck {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// StuckTenants lists the tenants with stuck reads, sorted (for logs and tests).
func (p *Pool) StuckTenants() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for t, r := range p.tenants {
		if r.stuck > 0 {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// Refused counts the reads refused so far: by a tenant's budget, and by the ceiling.
func (p *Pool) Refused() (tenant, node uint64) { return p.nRefused[0].Load(), p.nRefused[1].Load() }
