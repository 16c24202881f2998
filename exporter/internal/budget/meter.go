//go:build linux

package budget

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

// Meter counts one scrape's series per tenant against the series budget. A collector asks
// for its cgroup's Quota once (For) and takes one unit per series it sends (more for a series
// with long label values: SeriesUnits); a series beyond its tenant's allowance is not sent.
// The allowance is PerTenant, lowered by water-filling over the last scrape's demand when
// that was over the node-wide ceiling; the ceiling itself is a backstop counted as series are
// sent. Which of an over-budget tenant's series go is not fixed between scrapes (collectors
// run in parallel): the budget bounds their number, the cgroup and process budgets choose
// which cgroups and processes there are.
type Meter struct {
	book  *Book
	limit Limit
	allow map[string]int // this scrape's allowance of the tenants cut by the ceiling; read-only

	mu     sync.Mutex
	quotas map[string]*Quota
	total  atomic.Int64 // series sent, node-wide
}

// Quota is one tenant's share of a scrape's series. A nil Quota takes without bound.
type Quota struct {
	m       *Meter
	limit   int64
	asked   atomic.Int64 // series the collectors wanted to send
	dropped atomic.Int64 // within the tenant's allowance, refused by the node-wide backstop
	cg      cgroupid.Cgroup
}

// NewMeter starts metering one scrape's series (nil when the series budget is off).
func (b *Book) NewMeter() *Meter {
	l := b.limits.Series
	if l.PerTenant <= 0 && l.Node <= 0 {
		return nil
	}
	b.mu.Lock()
	allow := b.seriesAllow
	b.mu.Unlock()
	return &Meter{book: b, limit: l, allow: allow, quotas: map[string]*Quota{}}
}

// For is the quota of cg's tenant in this scrape (nil for a nil Meter).
func (m *Meter) For(cg cgroupid.Cgroup) *Quota {
	if m == nil {
		return nil
	}
	key := TenantOf(cg)
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.quotas[key]
	if q == nil {
		limit := int64(m.limit.PerTenant)
		if a, ok := m.allow[key]; ok && (limit <= 0 || int64(a) < limit) {
			limit = int64(a)
		}
		if limit <= 0 && m.limit.PerTenant <= 0 {
			limit = 1 << 62
		}
		q = &Quota{m: m, limit: limit, cg: cg}
		m.quotas[key] = q
	}
	return q
}

// SeriesBytes is the label bytes one unit of the series budget covers: a series whose label
// values are longer counts once more for every SeriesBytes started beyond it, so that the
// budget bounds the bytes of a response too (label values are capped at 256 bytes each, and a
// tenant chooses several of them). A Kubernetes container's series carry about 350 bytes of
// label values: one unit.
const SeriesBytes = 512

// SeriesUnits is what one series whose label values hold labelBytes bytes counts against the
// series budget: 1, plus 1 for every SeriesBytes started beyond the first.
func SeriesUnits(labelBytes int) int { return 1 + max(labelBytes-1, 0)/SeriesBytes }

// Take reports whether one more series of the tenant may be sent, whose label values hold
// labelBytes bytes (SeriesUnits).
func (q *Quota) Take(labelBytes int) bool { return q.TakeN(SeriesUnits(labelBytes)) }

// TakeN reports whether n more units of the tenant may be sent (a histogram's buckets, sum
// and count): all of them or none.
func (q *Quota) TakeN(n int) bool {
	if q == nil {
		return true
	}
	if q.asked.Add(int64(n)) > q.limit {
		return false
	}
	if node := q.m.limit.Node; node > 0 && q.m.total.Add(int64(n)) > int64(node) {
		q.dropped.Add(int64(n))
		return false
	}
	return true
}

// Done ends the scrape's metering: the tenants over their allowance go to the book, and the
// next scrape's allowances are shared out from this one's demand when it exceeded the
// ceiling. Series taken after Done (a collector that outlived its scrape) are not counted.
func (m *Meter) Done() {
	if m == nil {
		return
	}
	m.mu.Lock()
	keys := make([]string, 0, len(m.quotas))
	for k := range m.quotas {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the remainder of the ceiling goes the same way every scrape
	quotas := make([]*Quota, len(keys))
	for i, k := range keys {
		quotas[i] = m.quotas[k]
	}
	m.mu.Unlock()
	var skips []Skip
	used, total := 0, 0
	wants := make([]int, len(quotas))
	for i, q := range quotas {
		asked := int(q.asked.Load())
		sent := min(int64(asked), q.limit) - q.dropped.Load()
		used += int(sent)
		wants[i] = asked
		if m.limit.PerTenant > 0 {
			wants[i] = min(asked, m.limit.PerTenant)
		}
		total += wants[i]
		if int(sent) < asked {
			reason := ReasonNode
			if m.limit.PerTenant > 0 && asked > m.limit.PerTenant {
				reason = ReasonTenant
			}
			skips = append(skips, Skip{Budget: Series, Reason: reason, Tenant: keys[i], Name: TenantName(q.cg), Kept: int(sent), Skipped: asked - int(sent)})
		}
	}
	var allow map[string]int
	if m.limit.Node > 0 && total > m.limit.Node {
		allow = map[string]int{}
		for i, a := range fill(wants, m.limit.Node) {
			if a < wants[i] {
				allow[keys[i]] = a
			}
		}
	}
	m.book.mu.Lock()
	m.book.seriesAllow = allow
	m.book.mu.Unlock()
	m.book.Pass(Series, used, skips)
}

type meterKey struct{}

// WithMeter carries m to the collectors of a scrape.
func WithMeter(ctx context.Context, m *Meter) context.Context {
	if m == nil {
		return ctx
	}
	return context.WithValue(ctx, meterKey{}, m)
}

// MeterFrom is the scrape's Meter (nil: series are not metered).
func MeterFrom(ctx context.Context) *Meter {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m
}
