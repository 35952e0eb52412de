package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/fleet"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/budget"
	"github.com/slipway-dev/slipway/operator/window"
)

// Schedule says when new cycles may start (reboot windows minus exclusions). window.Schedule and
// FLUO's window.Window are Schedules.
type Schedule interface {
	Open(t time.Time) bool
	NextOpen(t time.Time) time.Time
	String() string
}

// Blocker holds nodes back before admission (package blocker: pods, alerts, minimum Ready nodes).
// Check fails closed: an error is a reason to block.
type Blocker interface {
	Name() string
	Check(ctx context.Context, node *corev1.Node) (blocked bool, reason string)
}

// FleetWide is implemented by blockers that hold every node alike; they are checked once per
// admission, not per candidate.
type FleetWide interface{ FleetWide() bool }

// blockerRetry is how soon a node held by a blocker is looked at again even if nothing it watches
// changed (Prometheus alerts come and go without a Node or Pod event).
const blockerRetry = 10 * time.Second

// ControlPlaneOrder says whether workers or control-plane nodes go first.
type ControlPlaneOrder string

const (
	OrderNone              ControlPlaneOrder = "none"                // both compete for the budget
	OrderWorkersFirst      ControlPlaneOrder = "workers-first"       // no control-plane node starts while a worker waits or is in its cycle
	OrderControlPlaneFirst ControlPlaneOrder = "control-plane-first" // no worker starts while a control-plane node waits or is in its cycle
)

// ParseControlPlaneOrder reads --control-plane-order.
func ParseControlPlaneOrder(s string) (ControlPlaneOrder, error) {
	switch o := ControlPlaneOrder(s); o {
	case OrderNone, OrderWorkersFirst, OrderControlPlaneFirst:
		return o, nil
	}
	return "", fmt.Errorf("control-plane order %q: want %q, %q or %q", s, OrderNone, OrderWorkersFirst, OrderControlPlaneFirst)
}

// ControlPlaneLabel marks control-plane nodes (kubeadm and most distributions set it).
const ControlPlaneLabel = protocol.ControlPlaneLabel

// Why a waiting node is not admitted: the value of update.slipway.dev/blocked-by is "<kind>: <detail>"
// and kind is the reason label of slipway_operator_blocked_nodes. Blockers add their own Name().
const (
	BlockedBudget = "budget"
	BlockedWindow = "window"
	BlockedPaused = "paused"
	BlockedOrder  = "order"
)

// group is the budget group of a node (protocol.BudgetGroup: the --group-label value, else the group
// its FleetLock client asked in, else ""). The label wins because an admin set it on purpose.
func (c *Controller) group(n *corev1.Node) string { return protocol.BudgetGroup(n, c.cfg.GroupLabel) }

var isControlPlane = protocol.IsControlPlane

// decision is the admission answer for one node.
type decision struct {
	admitted bool
	why      string        // "" when admitted; else "<kind>: <detail>"
	retry    time.Duration // when only time can change the answer
}

// admission decides whether name may start a cycle now. The order of the gates is the order a person
// would want to read them: when (window), whether at all (pause, fleet-wide blockers), then who
// (control-plane order, budgets), then per-node blockers in admission order.
func (c *Controller) admission(ctx context.Context, name string) decision {
	now := c.cfg.Now()
	if s := c.schedule(); s != nil && !s.Open(now) {
		next := s.NextOpen(now)
		if next.IsZero() {
			return decision{why: BlockedWindow + ": no reboot window opens in the next 400 days (" + s.String() + ")"}
		}
		return decision{why: BlockedWindow + ": closed until " + next.UTC().Format(time.RFC3339), retry: next.Sub(now) + time.Second}
	}
	sw := c.fleetSwitch()
	self, err := c.node(name)
	if err != nil {
		return decision{why: "node gone"}
	}
	if held, why := sw.Holds(c.group(self)); held {
		return decision{why: BlockedPaused + ": " + why}
	}
	// Every fleet-wide blocker is asked (not only up to the first that blocks), so the published
	// status lists all that are active.
	active := map[string]string{}
	first := ""
	for _, b := range c.cfg.Blockers {
		if fw, ok := b.(FleetWide); ok && fw.FleetWide() {
			if blocked, reason := b.Check(ctx, self); blocked {
				active[b.Name()] = reason
				if first == "" {
					first = b.Name() + ": " + reason
				}
			}
		}
	}
	c.noteBlockers(active)
	if first != "" {
		// Alerts clear without any Node changing: look again after the blockers' cache TTL.
		return decision{why: first, retry: blockerRetry}
	}
	return c.currentPlan(ctx, sw, now).decide(name, c.cfg.ControlPlaneOrder)
}

// planTTL bounds how long one admission plan is reused while nothing it reads changed: per-node
// blockers (pods, min-ready) may change without the index noticing.
const planTTL = time.Second

// admissionPlan is the budget's answer for every waiting node at once, computed once per change of
// the fleet (fleetIndex.gen) rather than once per waiting node.
type admissionPlan struct {
	gen                 uint64
	needGen             uint64
	at                  time.Time
	admitted            map[string]bool
	blockedBy           map[string]string // per-node blockers that held a node the budget would admit
	full                map[string]bool   // pools full after the admissions above
	waiting             map[string]entry
	busyWorkers, busyCP bool
}

// currentPlan returns the plan for the fleet as it is now, reusing the last one if nothing it read
// has changed.
func (c *Controller) currentPlan(ctx context.Context, sw fleet.Switch, now time.Time) *admissionPlan {
	c.stateMu.Lock()
	needGen := c.needGen
	c.stateMu.Unlock()
	if p := c.plan; p != nil && p.gen == c.index.generation() && p.needGen == needGen && !now.Before(p.at) && now.Sub(p.at) < planTTL {
		return p
	}
	s := c.index.snapshot()
	pools := map[string]budget.Pool{budget.Global: {Limit: c.cfg.MaxUnavailable.Limit(s.total), Used: s.used[budget.Global]}}
	if c.cfg.MaxUnavailablePerGroup != nil {
		for g, size := range s.size {
			k := "group/" + g
			pools[k] = budget.Pool{Limit: c.cfg.MaxUnavailablePerGroup.Limit(size), Used: s.used[k]}
		}
	}
	if s.cpSize > 0 {
		pools[controlPlanePool] = budget.Pool{Limit: c.cfg.MaxUnavailableControlPlane.Limit(s.cpSize), Used: s.used[controlPlanePool]}
	}
	if c.metricsOn() {
		c.cfg.Metrics.budget(pools[budget.Global].Limit, pools[budget.Global].Used)
	}
	var cands []budget.Candidate
	c.stateMu.Lock()
	for name, e := range s.waiting {
		if e.paused {
			continue
		}
		if held, _ := sw.Holds(e.group); held {
			continue
		}
		// Candidates the order keeps out must not take budget from the others either.
		if c.cfg.ControlPlaneOrder == OrderWorkersFirst && e.cp && s.busyWorkers ||
			c.cfg.ControlPlaneOrder == OrderControlPlaneFirst && !e.cp && s.busyCP {
			continue
		}
		since, ok := c.needSince[name]
		if !ok {
			since = now // not synced since this operator started: as if it asked just now
		}
		cands = append(cands, budget.Candidate{Name: name, Unavailable: e.counts, Pools: e.pools(), Since: since})
	}
	c.stateMu.Unlock()
	p := &admissionPlan{gen: s.gen, needGen: needGen, at: now, admitted: map[string]bool{}, blockedBy: map[string]string{},
		full: map[string]bool{}, waiting: s.waiting, busyWorkers: s.busyWorkers, busyCP: s.busyCP}
	skip := func(cand string) bool {
		n, err := c.node(cand)
		if err != nil {
			p.blockedBy[cand] = "node gone"
			return true
		}
		for _, b := range c.cfg.Blockers {
			if fw, ok := b.(FleetWide); ok && fw.FleetWide() {
				continue
			}
			if blocked, reason := b.Check(ctx, n); blocked {
				p.blockedBy[cand] = b.Name() + ": " + reason
				return true
			}
		}
		return false
	}
	used := map[string]int{}
	for k, pool := range pools {
		used[k] = pool.Used
	}
	for _, a := range budget.AdmitPools(pools, cands, skip) {
		p.admitted[a] = true
		if e := s.waiting[a]; !e.counts {
			for _, k := range append([]string{budget.Global}, e.pools()...) {
				used[k]++
			}
		}
	}
	for k, pool := range pools {
		if used[k] >= pool.Limit {
			p.full[k] = true
		}
	}
	c.plan = p
	return p
}

// decide is the plan's answer for one node.
func (p *admissionPlan) decide(name string, order ControlPlaneOrder) decision {
	e, ok := p.waiting[name]
	if !ok {
		return decision{why: "not waiting"}
	}
	switch {
	case order == OrderWorkersFirst && e.cp && p.busyWorkers:
		return decision{why: BlockedOrder + ": workers first (--control-plane-order=workers-first)"}
	case order == OrderControlPlaneFirst && !e.cp && p.busyCP:
		return decision{why: BlockedOrder + ": control plane first (--control-plane-order=control-plane-first)"}
	}
	if p.admitted[name] {
		return decision{admitted: true}
	}
	if why, ok := p.blockedBy[name]; ok {
		return decision{why: why, retry: blockerRetry}
	}
	// Which pool is full, for a person reading the node: after the admissions above.
	var full []string
	for _, k := range append([]string{budget.Global}, e.pools()...) {
		if p.full[k] {
			label := k
			if k == budget.Global {
				label = "max-unavailable"
			}
			full = append(full, label)
		}
	}
	if len(full) == 0 {
		full = []string{"nodes ahead in the admission order"}
	}
	// Waiting for budget needs no timer: the node that frees it triggers enqueueWaiting.
	return decision{why: BlockedBudget + ": full (" + strings.Join(full, ", ") + ")"}
}

func (c *Controller) metricsOn() bool { return c.cfg.Metrics != nil }

// schedule is the configured Schedule, FLUO's window if only that is set, or nil (always open).
func (c *Controller) schedule() Schedule {
	if c.cfg.Schedule != nil {
		return c.cfg.Schedule
	}
	if c.cfg.Window != nil {
		return fluoWindow{c.cfg.Window}
	}
	return nil
}

// fluoWindow is FLUO's single window as a Schedule.
type fluoWindow struct{ w *window.Window }

func (f fluoWindow) Open(t time.Time) bool          { return f.w.Contains(t) }
func (f fluoWindow) NextOpen(t time.Time) time.Time { return f.w.NextOpen(t) }
func (f fluoWindow) String() string                 { return f.w.String() }

// blockedKind is the kind of a blocked-by value, the reason label of slipway_operator_blocked_nodes.
func blockedKind(why string) string {
	k, _, _ := strings.Cut(why, ":")
	return k
}
