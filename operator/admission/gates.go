package admission

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// Schedule says when new cycles may start (reboot windows minus exclusions); window.Schedule is one.
type Schedule interface {
	Open(t time.Time) bool
	NextOpen(t time.Time) time.Time
	String() string
}

// Switch is the pause switch as admissions must see it (fleet.Switch, plus a self-pause decided but
// not yet visible).
type Switch interface {
	Holds(group string) (bool, string)
}

// DefaultBlockerRetry is how soon a node held by a blocker is looked at again even if nothing it
// watches changed (Prometheus alerts come and go without a Node or Pod event): Config.BlockerRetry
// when 0.
const DefaultBlockerRetry = 10 * time.Second

// Input is what every gate sees for one decision.
type Input struct {
	Name string
	Node Node         // its entry
	Obj  *corev1.Node // the Node as the controller sees it, for blockers
	Now  time.Time
	// Fleet is the rest of the fleet, shared by the gates of one decision.
	Fleet *Fleet
}

// Gate is one condition of admission: it lets the node pass (Pass) or holds it. Gates run in order;
// the first that holds decides.
type Gate struct {
	Name  string
	Check func(ctx context.Context, in Input) Verdict
}

// Chain is the ordered gates. The order is the order a person would want to read them: when
// (window), whether at all (pause, fleet-wide blockers), then who (control-plane order, budgets), then
// per-node blockers in admission order.
type Chain []Gate

// Run returns the first verdict that holds the node, or Pass.
func (c Chain) Run(ctx context.Context, in Input) Verdict {
	for _, g := range c {
		if v := g.Check(ctx, in); !v.Passes() {
			return v
		}
	}
	return Pass
}

// WindowGate holds every node while s is closed (s nil: always open).
func WindowGate(s Schedule) Gate {
	return Gate{"window", func(_ context.Context, in Input) Verdict {
		if s == nil || s.Open(in.Now) {
			return Pass
		}
		next := s.NextOpen(in.Now)
		if next.IsZero() {
			return Held(KindWindow, "no reboot window opens in the next 400 days ("+s.String()+")", 0)
		}
		return Held(KindWindow, "closed until "+next.UTC().Format(time.RFC3339), next.Sub(in.Now)+time.Second)
	}}
}

// PauseGate holds a node while the switch pauses the fleet or its group.
func PauseGate() Gate {
	return Gate{"pause", func(_ context.Context, in Input) Verdict {
		for _, g := range in.Node.Groups() {
			if held, why := in.Fleet.Switch.Holds(g); held {
				return Held(KindPaused, why, 0)
			}
		}
		return Pass
	}}
}

// AgentProtocolGate holds a node whose agent speaks a node protocol this operator does not: an agent
// upgraded before the operator may mean something else by the keys it writes, and a reboot is not
// the place to find out. The previous protocol is spoken too, so agents may also lag the operator.
func AgentProtocolGate() Gate {
	return Gate{"agent-version", func(_ context.Context, in Input) Verdict {
		v := in.Node.AgentProtocol
		if v == "" || slices.Contains(protocol.AgentProtocols, v) {
			return Pass
		}
		return Held(KindAgentVersion, fmt.Sprintf("its agent speaks node protocol %q; this operator speaks %s: upgrade the operator first, or roll the agent back (docs/install.md, Upgrade)", truncateValue(v, 32), strings.Join(protocol.AgentProtocols, " and ")), 0)
	}}
}

// truncateValue cuts a value a node wrote to n bytes for a reason text.
func truncateValue(v string, n int) string {
	if len(v) > n {
		return v[:n] + "..."
	}
	return v
}

// FailedVersionGate holds a node asking for the OS version it once rebooted for and came back without
// (a rolled-back update): rebooting it again for that version would roll back again. A person removes
// failed-version to let it try again; a node asking for another version goes.
func FailedVersionGate() Gate {
	return Gate{"failed-version", func(_ context.Context, in Input) Verdict {
		if v := in.Node.FailedVersion; v == "" || in.Node.AskedVersion != v {
			return Pass
		}
		return Held(KindFailedVersion, fmt.Sprintf("came back on its old version after rebooting for %s; not asked again for %s until a person removes annotation %s", in.Node.FailedVersion, in.Node.FailedVersion, protocol.FailedVersion), 0)
	}}
}

// UndrainableGate holds a node whose last drain failed under --drain-failure-policy=skip until
// retry has passed since; it then goes behind the nodes that waited longer (its wait began anew).
func UndrainableGate(retry time.Duration) Gate {
	return Gate{"undrainable", func(_ context.Context, in Input) Verdict {
		at := in.Node.UndrainableAt
		if at.IsZero() || !in.Now.Before(at.Add(retry)) {
			return Pass
		}
		next := at.Add(retry)
		return Held(KindUndrainable, fmt.Sprintf("its drain failed at %s (--drain-failure-policy=skip); retried after %s (--undrainable-retry)",
			at.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339)), next.Sub(in.Now)+10*time.Millisecond)
	}}
}

// FleetBlockersGate asks every fleet-wide blocker (not only up to the first that blocks, so the
// published status lists all that are active) and holds the node on the first that blocks.
func FleetBlockersGate(blockers []Blocker, retry time.Duration) Gate {
	return Gate{"fleet-blockers", func(ctx context.Context, in Input) Verdict {
		active := map[string]string{}
		first := Pass
		for _, r := range CheckAll(ctx, blockers, in.Obj) {
			active[r.Name] = r.Reason
			if first.Passes() {
				// Alerts clear without any Node changing: look again after the blockers' cache TTL.
				first = Held(Kind(r.Name), r.Reason, retry)
			}
		}
		in.Fleet.ActiveBlockers = active
		return first
	}}
}

// Order says whether workers or control-plane nodes go first (--control-plane-order).
type Order string

const (
	OrderNone              Order = "none"                // both compete for the budget
	OrderWorkersFirst      Order = "workers-first"       // no control-plane node starts while a worker waits or is in its cycle
	OrderControlPlaneFirst Order = "control-plane-first" // no worker starts while a control-plane node waits or is in its cycle
)

// ParseOrder reads --control-plane-order.
func ParseOrder(s string) (Order, error) {
	switch o := Order(s); o {
	case OrderNone, OrderWorkersFirst, OrderControlPlaneFirst:
		return o, nil
	}
	return "", fmt.Errorf("control-plane order %q: want %q, %q or %q", s, OrderNone, OrderWorkersFirst, OrderControlPlaneFirst)
}

// keptBack reports whether the order keeps a node with entry e back while the fleet is as in s.
func (o Order) keptBack(e Node, s *Snapshot) bool {
	return o == OrderWorkersFirst && e.ControlPlane && s.BusyWorkers || o == OrderControlPlaneFirst && !e.ControlPlane && s.BusyCP
}

// OrderGate holds control-plane nodes while workers are busy, or the other way round.
func OrderGate(o Order) Gate {
	return Gate{"order", func(_ context.Context, in Input) Verdict {
		if !o.keptBack(in.Node, in.Fleet.Snapshot) {
			return Pass
		}
		if o == OrderWorkersFirst {
			return Held(KindOrder, "workers first (--control-plane-order=workers-first)", 0)
		}
		return Held(KindOrder, "control plane first (--control-plane-order=control-plane-first)", 0)
	}}
}

// BudgetGate lets a node pass when the plan (every waiting node ordered, each admitted while all its
// pools have room) admits it or found room for it but a per-node blocker holds it. Waiting for budget
// needs no timer: the node that frees it makes the controller look again.
func BudgetGate() Gate {
	return Gate{"budget", func(_ context.Context, in Input) Verdict {
		p := in.Fleet.Plan()
		if p.Admitted[in.Name] {
			return Pass
		}
		if _, ok := p.HeldBy[in.Name]; ok {
			return Pass
		}
		// Which pool is full, for a person reading the node: after the plan's admissions.
		if v := settlingVerdict(in); !v.Passes() {
			return v
		}
		var full []string
		for _, k := range in.Node.PoolKeys() {
			if p.Full[k] {
				label := k
				if k == FleetPool {
					label = "max-unavailable"
				}
				full = append(full, label)
			}
		}
		if len(full) == 0 {
			full = []string{"nodes ahead in the admission order"}
		}
		return Held(KindBudget, "full ("+strings.Join(full, ", ")+")", 0)
	}}
}

// settlingVerdict holds the node with KindSettling when every full pool it is in would have room but
// for nodes settling after their cycle; the reason says why they settle (not which they are, so it
// stays the same while nodes come and go).
func settlingVerdict(in Input) Verdict {
	p, s := in.Fleet.Plan(), in.Fleet.Snapshot
	if len(s.Settling) == 0 {
		return Pass
	}
	var whys []string
	for _, k := range in.Node.PoolKeys() {
		if !p.Full[k] {
			continue
		}
		if !p.Settled[k] {
			return Pass // full with nodes in their cycle: the budget's answer
		}
		for _, e := range s.Settling {
			if slices.Contains(e.PoolKeys(), k) {
				whys = append(whys, strings.Split(e.Settling, "; ")...)
			}
		}
	}
	if len(whys) == 0 {
		return Pass
	}
	sort.Strings(whys)
	return Held(KindSettling, "nodes that finished their cycle hold their slots: "+strings.Join(slices.Compact(whys), "; "), 0)
}

// NodeBlockersGate holds a node a per-node blocker holds (asked by the plan, in admission order, only
// for nodes the budget has room for: a held node takes no budget from the others).
func NodeBlockersGate() Gate {
	return Gate{"node-blockers", func(_ context.Context, in Input) Verdict {
		if v, ok := in.Fleet.Plan().HeldBy[in.Name]; ok {
			return v
		}
		return Pass
	}}
}
