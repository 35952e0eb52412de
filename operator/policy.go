package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

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
	all := c.allNodes()
	sw := c.fleetSwitch()
	self := c.findNode(all, name)
	if self == nil {
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

	pools := map[string]budget.Pool{budget.Global: {Limit: c.cfg.MaxUnavailable.Limit(len(all))}}
	groupSize := map[string]int{}
	cpCount := 0
	for _, n := range all {
		groupSize[c.group(n)]++
		if isControlPlane(n) {
			cpCount++
		}
	}
	if c.cfg.MaxUnavailablePerGroup != nil {
		for g, size := range groupSize {
			pools["group/"+g] = budget.Pool{Limit: c.cfg.MaxUnavailablePerGroup.Limit(size)}
		}
	}
	if cpCount > 0 {
		pools["control-plane"] = budget.Pool{Limit: c.cfg.MaxUnavailableControlPlane.Limit(cpCount)}
	}
	var cands []budget.Candidate
	busyWorkers, busyCP := false, false // waiting or in a cycle, for the control-plane order
	for _, n := range all {
		f := protocol.Observe(n, c.cfg.Hooks)
		state := protocol.Classify(f)
		cp := isControlPlane(n)
		in := []string{"group/" + c.group(n)}
		if cp {
			in = append(in, "control-plane")
		}
		if c.counts(f) {
			for _, k := range append([]string{budget.Global}, in...) {
				if p, ok := pools[k]; ok {
					p.Used++
					pools[k] = p
				}
			}
		}
		if (state == protocol.NeedsReboot && !f.Paused) || state.InCycle() {
			if cp {
				busyCP = true
			} else {
				busyWorkers = true
			}
		}
		if state != protocol.NeedsReboot || f.Paused {
			continue
		}
		if held, _ := sw.Holds(c.group(n)); held {
			continue
		}
		since, ok := c.needSince[n.Name]
		if !ok {
			since = now // not synced since this operator started: as if it asked just now
		}
		cands = append(cands, budget.Candidate{Name: n.Name, Unavailable: c.counts(f), Pools: in, Since: since})
	}
	if c.metricsOn() {
		c.cfg.Metrics.budget(pools[budget.Global].Limit, pools[budget.Global].Used)
	}
	cp := isControlPlane(self)
	switch {
	case c.cfg.ControlPlaneOrder == OrderWorkersFirst && cp && busyWorkers:
		return decision{why: BlockedOrder + ": workers first (--control-plane-order=workers-first)"}
	case c.cfg.ControlPlaneOrder == OrderControlPlaneFirst && !cp && busyCP:
		return decision{why: BlockedOrder + ": control plane first (--control-plane-order=control-plane-first)"}
	}
	// Candidates the order keeps out must not take budget from the others either.
	filtered := cands[:0]
	for _, x := range cands {
		xcp := x.Pools[len(x.Pools)-1] == "control-plane"
		if c.cfg.ControlPlaneOrder == OrderWorkersFirst && xcp && busyWorkers ||
			c.cfg.ControlPlaneOrder == OrderControlPlaneFirst && !xcp && busyCP {
			continue
		}
		filtered = append(filtered, x)
	}
	blockedBy := map[string]string{}
	skip := func(cand string) bool {
		n := c.findNode(all, cand)
		for _, b := range c.cfg.Blockers {
			if fw, ok := b.(FleetWide); ok && fw.FleetWide() {
				continue
			}
			if blocked, reason := b.Check(ctx, n); blocked {
				blockedBy[cand] = b.Name() + ": " + reason
				return true
			}
		}
		return false
	}
	admitted := budget.AdmitPools(pools, filtered, skip)
	for _, a := range admitted {
		if a == name {
			return decision{admitted: true}
		}
	}
	if why, ok := blockedBy[name]; ok {
		return decision{why: why, retry: blockerRetry}
	}
	// Which pool is full, for a person reading the node: after the admissions above.
	after := map[string]int{}
	for k, p := range pools {
		after[k] = p.Used
	}
	for _, a := range admitted {
		for _, x := range filtered {
			if x.Name == a && !x.Unavailable {
				for _, k := range append([]string{budget.Global}, x.Pools...) {
					after[k]++
				}
			}
		}
	}
	var full []string
	for _, k := range append([]string{budget.Global}, "group/"+c.group(self), "control-plane") {
		if k == "control-plane" && !cp {
			continue
		}
		if p, ok := pools[k]; ok && after[k] >= p.Limit {
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

func (c *Controller) findNode(all []*corev1.Node, name string) *corev1.Node {
	for _, n := range all {
		if n.Name == name {
			return n
		}
	}
	return nil
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
