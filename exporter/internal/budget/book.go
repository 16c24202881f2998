package budget

import (
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// LogEvery limits the log to one line per tenant, budget and reason in this interval: a
// tenant over its budget is skipped every scrape.
const LogEvery = 5 * time.Minute

// maxLogged bounds the log times remembered (tenants come and go); beyond it the oldest
// half is forgotten, at worst one more line for each of those.
const maxLogged = 4096

// Book keeps, for each budget, what its last pass skipped, and counts every unit skipped by
// budget and reason. It is the one place the self-metrics, the log and diagnose read.
type Book struct {
	limits Limits
	logger *slog.Logger

	mu      sync.Mutex
	passes  map[string]pass
	skipped map[[2]string]uint64 // by budget and reason
	logged  map[[3]string]time.Time
	live    map[string]func() (used int, skips []Skip)
	namer   func(tenant string) string
	// seriesAllow are the next scrape's series allowances of the tenants the node-wide
	// ceiling cut in the last one (Meter.Done).
	seriesAllow map[string]int
}

type pass struct {
	used  int
	skips []Skip
}

// NewBook keeps the books of limits; logger gets the lines about tenants over a budget.
func NewBook(l Limits, logger *slog.Logger) *Book {
	return &Book{limits: l, logger: logger, passes: map[string]pass{}, skipped: map[[2]string]uint64{},
		logged: map[[3]string]time.Time{}, live: map[string]func() (int, []Skip){}}
}

// SetNamer gives the book the readable name of a tenant key, asked only for a line it logs
// or a tenant it lists without a name (a refused read knows only its tenant's key).
func (b *Book) SetNamer(f func(tenant string) string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.namer = f
}

// name fills s.Name from the namer. b.mu held.
func (b *Book) name(s Skip) Skip {
	if s.Name == "" && b.namer != nil {
		s.Name = b.namer(s.Tenant)
	}
	if s.Name == "" {
		s.Name = s.Tenant
	}
	return s
}

// Limits are the budgets kept.
func (b *Book) Limits() Limits { return b.limits }

// Pass records one pass of a budget (a walk, a listing, a scrape's series, the sampler's
// set): used units kept node-wide, and the tenants that lost units. Each skipped unit is
// counted; each tenant, budget and reason is logged at most every LogEvery.
func (b *Book) Pass(budget string, used int, skips []Skip) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.passes[budget] = pass{used: used, skips: skips}
	for _, s := range skips {
		b.skipped[[2]string{budget, s.Reason}] += uint64(s.Skipped)
		b.log(s)
	}
}

// Refused counts one unit refused on its own (a read refused because its tenant's reads are
// stuck), logged like Pass.
func (b *Book) Refused(s Skip) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.skipped[[2]string{s.Budget, s.Reason}]++
	b.log(s)
}

// Live makes f the state of a budget whose units are held, not passed (stuck reads): f says
// how many are held node-wide and which tenants are at their budget now.
func (b *Book) Live(budget string, f func() (used int, skips []Skip)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live[budget] = f
}

// log writes s's line unless its tenant, budget and reason was logged within LogEvery. b.mu held.
func (b *Book) log(s Skip) {
	if b.logger == nil {
		return
	}
	k := [3]string{s.Budget, s.Reason, s.Tenant}
	now := time.Now()
	if last, ok := b.logged[k]; ok && now.Sub(last) < LogEvery {
		return
	}
	s = b.name(s)
	if len(b.logged) >= maxLogged {
		b.forgetOldest()
	}
	b.logged[k] = now
	l := b.limits.Of(s.Budget)
	b.logger.Warn("tenant over budget: its units beyond it are skipped (logged once per tenant, budget and reason every 5m)",
		"budget", s.Budget, "reason", s.Reason, "tenant", tenantstr.Label(s.Name), "kept", s.Kept, "skipped", s.Skipped,
		"per_tenant", l.PerTenant, "node", l.Node)
}

// forgetOldest drops the older half of the log times. b.mu held.
func (b *Book) forgetOldest() {
	times := make([]time.Time, 0, len(b.logged))
	for _, t := range b.logged {
		times = append(times, t)
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	cut := times[len(times)/2]
	for k, t := range b.logged {
		if t.Before(cut) {
			delete(b.logged, k)
		}
	}
}

// State is one budget's figures for the self-metrics.
type State struct {
	Budget string
	// Used is what the last pass kept node-wide (stuck reads: held now).
	Used int
	// Skipped counts every unit skipped so far, by reason.
	Skipped map[string]uint64
	// TenantsOver counts the tenants that lost units in the last pass (stuck reads: at their
	// budget now), by reason.
	TenantsOver map[string]int
}

// States are every budget's figures, in Names order.
func (b *Book) States() []State {
	live := b.liveFuncs()
	lives := map[string]pass{}
	for name, f := range live {
		used, skips := f()
		lives[name] = pass{used: used, skips: skips}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]State, 0, len(Names))
	for _, name := range Names {
		p, ok := lives[name]
		if !ok {
			p = b.passes[name]
		}
		st := State{Budget: name, Used: p.used, Skipped: map[string]uint64{}, TenantsOver: map[string]int{}}
		for _, r := range []string{ReasonTenant, ReasonNode} {
			st.Skipped[r] = b.skipped[[2]string{name, r}]
			st.TenantsOver[r] = 0
		}
		for _, s := range p.skips {
			st.TenantsOver[s.Reason]++
		}
		out = append(out, st)
	}
	return out
}

// Skips are the tenants over a budget now: every budget's last pass, and the tenants at
// their budget of held units. Sorted by budget, then by units skipped, most first.
func (b *Book) Skips() []Skip {
	var out []Skip
	for _, f := range b.liveFuncs() {
		_, skips := f()
		out = append(out, skips...)
	}
	b.mu.Lock()
	for name, p := range b.passes {
		if _, ok := b.live[name]; !ok {
			out = append(out, p.skips...)
		}
	}
	for i := range out {
		out[i] = b.name(out[i])
	}
	b.mu.Unlock()
	rank := map[string]int{}
	for i, n := range Names {
		rank[n] = i
	}
	sort.Slice(out, func(i, j int) bool {
		a, c := out[i], out[j]
		if a.Budget != c.Budget {
			return rank[a.Budget] < rank[c.Budget]
		}
		if a.Skipped != c.Skipped {
			return a.Skipped > c.Skipped
		}
		return a.Tenant < c.Tenant
	})
	return out
}

func (b *Book) liveFuncs() map[string]func() (int, []Skip) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]func() (int, []Skip), len(b.live))
	for k, v := range b.live {
		out[k] = v
	}
	return out
}
