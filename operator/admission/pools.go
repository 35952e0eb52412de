package admission

import (
	"sort"
	"strings"

	"github.com/slipway-dev/slipway/operator/budget"
)

// Limits are the budgets as configured: --max-unavailable, --max-unavailable-per-group (nil: groups
// are counted but not limited), --max-unavailable-control-plane.
type Limits struct {
	Fleet        budget.Max
	PerGroup     *budget.Max
	ControlPlane budget.Max
	// Policies: each RebootPolicy's own maxUnavailable, by name (absent: its nodes are counted, not
	// limited, beyond the fleet's and the groups' budgets).
	Policies map[string]budget.Max
}

// PoolKind is what a pool limits.
type PoolKind string

const (
	PoolFleet        PoolKind = "fleet"
	PoolGroup        PoolKind = "group"
	PoolControlPlane PoolKind = "control-plane"
	PoolPolicy       PoolKind = "policy"
)

// BudgetPool is one budget: Nodes are in it, Used count against it, at most Limit may (Limited false: no
// limit, counted for people only).
type BudgetPool struct {
	Key     string
	Kind    PoolKind
	Group   string // PoolGroup only
	Policy  string // PoolPolicy only
	Nodes   int
	Used    int
	Limit   int
	Limited bool
}

// Full reports whether admitting one more node that is not yet unavailable would exceed the limit.
func (p BudgetPool) Full() bool { return p.Limited && p.Used >= p.Limit }

// Pools counts every pool over nodes: the fleet first, then the control plane (when it has nodes),
// then every group by name. It is the one definition of what counts against which budget; the
// Index keeps the same counts incrementally and the status view calls this with the configuration the
// operator publishes.
func Pools(nodes []Node, l Limits) []BudgetPool {
	size, used := map[string]int{}, map[string]int{}
	for _, e := range nodes {
		for _, k := range e.PoolKeys() {
			size[k]++
			if e.Occupies() {
				used[k]++
			}
		}
	}
	return poolsOf(len(nodes), size, used, l)
}

// poolsOf builds the pools from counts by key (size[FleetPool] may be absent: total says).
func poolsOf(total int, size, used map[string]int, l Limits) []BudgetPool {
	out := []BudgetPool{{Key: FleetPool, Kind: PoolFleet, Nodes: total, Used: used[FleetPool], Limit: l.Fleet.Limit(total), Limited: true}}
	if n := size[ControlPlanePool]; n > 0 {
		out = append(out, BudgetPool{Key: ControlPlanePool, Kind: PoolControlPlane, Nodes: n, Used: used[ControlPlanePool],
			Limit: l.ControlPlane.Limit(n), Limited: true})
	}
	for _, g := range suffixes(size, groupPoolPrefix) {
		k := GroupPool(g)
		p := BudgetPool{Key: k, Kind: PoolGroup, Group: g, Nodes: size[k], Used: used[k]}
		if l.PerGroup != nil {
			p.Limit, p.Limited = l.PerGroup.Limit(p.Nodes), true
		}
		out = append(out, p)
	}
	for _, name := range suffixes(size, policyPoolPrefix) {
		k := PolicyPool(name)
		p := BudgetPool{Key: k, Kind: PoolPolicy, Policy: name, Nodes: size[k], Used: used[k]}
		if m, ok := l.Policies[name]; ok {
			p.Limit, p.Limited = m.Limit(p.Nodes), true
		}
		out = append(out, p)
	}
	return out
}

// suffixes are the keys of size that start with prefix, without it, sorted: the groups or the
// policies that have pools.
func suffixes(size map[string]int, prefix string) []string {
	var out []string
	for k := range size {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out = append(out, rest)
		}
	}
	sort.Strings(out)
	return out
}
