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
	"github.com/slipway-dev/slipway/operator/versions"
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

// Rules is what admission reads of one reboot policy: the rules a node's pool puts on when its cycle
// may start. Built once (package policy compiles it from the flags) and never changed: gates and plans
// read it concurrently.
type Rules struct {
	// Name is the policy's name ("" the default policy, which the flags configure) and Generation the
	// RebootPolicy's generation it was built from (pinned on a node at its admission).
	Name       string
	Generation int64
	// UID of the RebootPolicy object, pinned with the generation (its first characters).
	UID string
	// Invalid: why the policy is not accepted (its spec did not compile): its nodes are held.
	Invalid string
	// Paused: why the policy is paused ("" it is not): its nodes are held.
	Paused string
	// Schedule: the reboot windows minus exclusions (nil: always open).
	Schedule Schedule
	// Canary: per-version canaries and halts (zero: off).
	Canary Canary
	// Versions: which OS versions its nodes may reboot into (empty: any; DeclaredVersionGate).
	Versions versions.Rules
	// Proof: the proof of another cluster its nodes' versions need (nil: none; ProofGate).
	Proof ProofCheck
	// UndrainableRetry: how long a node whose drain failed under --drain-failure-policy=skip waits
	// before it is admitted again.
	UndrainableRetry time.Duration
	// Blockers are the policy's own (a RebootPolicy's health checks and blocking pod selectors): its
	// fleet-wide ones hold the policy's nodes (PoolBlockersGate), its per-node ones are asked by the
	// plan (NodeBlockersGate). The default policy's are the Admitter's Config.Blockers.
	Blockers []Blocker
}

// Input is what every gate sees for one decision.
type Input struct {
	Name string
	Node Node         // its entry
	Obj  *corev1.Node // the Node as the controller sees it, for blockers
	Now  time.Time
	// Policy is the node's reboot policy.
	Policy *Rules
	// Fleet is the rest of the fleet, shared by the gates of one decision.
	Fleet *Fleet
	// Planning is set when the budget plan asks (a PlanCheck gate about a node the budget has room
	// for); nil when the chain decides the node itself.
	Planning *Planning
}

// noPolicy is the policy of an Input without one: nothing configured.
var noPolicy = &Rules{}

// pol is the node's policy (never nil).
func (in Input) pol() *Rules {
	if in.Policy == nil {
		return noPolicy
	}
	return in.Policy
}

// Planning is what one budget plan's checks share while it admits nodes in queue order.
type Planning struct {
	// Extra counts the nodes this plan admitted so far, by the OS version they ask for: canaries the
	// next candidates see.
	Extra map[string]int
}

// Scope says for which nodes a gate's answer is the same: every node at once (fleet), every node of
// one policy (pool: the plan asks it once per policy), or each node on its own.
type Scope string

const (
	ScopeFleet Scope = "fleet"
	ScopePool  Scope = "pool"
	ScopeNode  Scope = "node"
)

// PlanUse says what the budget plan does with a gate. The plan admits waiting nodes in queue order
// while every pool has room; a node a gate holds must take no budget from the others.
type PlanUse string

const (
	// PlanFilter: a node the gate holds is not a candidate: no budget, no place in the queue.
	PlanFilter PlanUse = "filter"
	// PlanCheck: asked, in queue order, about each node the budget has room for; a node it holds
	// keeps its place and uses nothing.
	PlanCheck PlanUse = "check"
	// PlanNone: not asked by the plan: it holds every node alike (the plan does not matter while
	// it holds), or it is the plan's own answer.
	PlanNone PlanUse = "-"
)

// Gate is one condition of admission: it lets the node pass (Pass) or holds it. Gates run in order;
// the first that holds decides.
type Gate struct {
	Name  string
	Scope Scope
	Plan  PlanUse
	// Doc says when it holds a node, in a line of docs/concepts.md's gate table.
	Doc   string
	Check func(ctx context.Context, in Input) Verdict
}

// Chain is the ordered gates. The order is the order a person would want to read them: when
// (window), whether at all (pauses, the node's own state, fleet-wide blockers), then who
// (control-plane order, budgets), then per-node blockers in admission order.
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

// Gates is the chain every decision runs, in order; docs/concepts.md's gate table is generated from
// it (TestGateTable).
var Gates = Chain{PolicyGate, WindowGate, PauseGate, RebootPausedGate, AgentProtocolGate, FailedVersionGate, UndrainableGate,
	DeclaredVersionGate, ProofGate, VersionGate, FleetBlockersGate, PoolBlockersGate, OrderGate, BudgetGate, NodeBlockersGate}

// PolicyGate holds a node whose reboot policy is not clear: two RebootPolicies of the same priority
// match it, or its policy's spec did not compile. Never admitted under a policy that failed to compile.
var PolicyGate = Gate{Name: "policy", Scope: ScopeNode, Plan: PlanFilter,
	Doc: "two RebootPolicies of the same highest priority match the node, or its RebootPolicy's spec did not compile (`Accepted=False`)",
	Check: func(_ context.Context, in Input) Verdict {
		if t := in.Node.PolicyTied; t != "" {
			return Held(KindPolicy, "matches "+t+" at the same priority: change one's priority or selector", 0)
		}
		if p := in.pol(); p.Invalid != "" {
			return Held(KindPolicy, "invalid: "+p.Name+": "+p.Invalid, 0)
		}
		return Pass
	}}

// WindowGate holds every node of a policy while its schedule is closed.
var WindowGate = Gate{Name: "window", Scope: ScopePool, Plan: PlanFilter,
	Doc: "its policy's reboot windows are closed, or an exclusion is in force (`--reboot-window`, `--reboot-exclusion`, FLUO's window)",
	Check: func(_ context.Context, in Input) Verdict {
		s := in.pol().Schedule
		if s == nil || s.Open(in.Now) {
			return Pass
		}
		next := s.NextOpen(in.Now)
		if next.IsZero() {
			return Held(KindWindow, "no reboot window opens in the next 400 days ("+s.String()+")", 0)
		}
		return Held(KindWindow, "closed until "+next.UTC().Format(time.RFC3339), next.Sub(in.Now)+time.Second)
	}}

// PauseGate holds a node while the switch pauses the fleet or its group, or its policy is paused.
var PauseGate = Gate{Name: "pause", Scope: ScopeNode, Plan: PlanFilter,
	Doc: "the fleet, the node's budget group or its RebootPolicy is paused (`kubectl slipway pause`, the failure budget, `spec.paused`)",
	Check: func(_ context.Context, in Input) Verdict {
		for _, g := range in.Node.Groups() {
			if held, why := in.Fleet.Switch.Holds(g); held {
				return Held(KindPaused, why, 0)
			}
		}
		if why := in.pol().Paused; why != "" {
			return Held(KindPaused, why, 0)
		}
		return Pass
	}}

// RebootPausedGate holds a node a person paused (FLUO's reboot-paused annotation). The controller
// does not ask about such a node; the plan leaves it out, so it takes no budget.
var RebootPausedGate = Gate{Name: "reboot-paused", Scope: ScopeNode, Plan: PlanFilter,
	Doc: "the node is reboot-paused (annotation `" + protocol.RebootPaused + "`)",
	Check: func(_ context.Context, in Input) Verdict {
		if in.Node.Paused {
			return NodePaused
		}
		return Pass
	}}

// NodePaused is what holds a node that wants a reboot while it is reboot-paused: the controller writes
// it as the node's blocked-by (with waiting-since) like any other hold, so the status view, the
// blocked-nodes metric and the pending-too-long alert see a node a person paused and forgot.
var NodePaused = Held(KindPaused, "node: annotation "+protocol.RebootPaused+" is set (kubectl slipway resume --nodes NODE, or remove it)", 0)

// AgentProtocolGate holds a node whose agent speaks a node protocol this operator does not: an agent
// upgraded before the operator may mean something else by the keys it writes, and a reboot is not
// the place to find out. The previous protocol is spoken too, so agents may also lag the operator.
var AgentProtocolGate = Gate{Name: "agent-version", Scope: ScopeNode, Plan: PlanCheck,
	Doc: "its agent speaks a node protocol this operator does not",
	Check: func(_ context.Context, in Input) Verdict {
		v := in.Node.AgentProtocol
		if v == "" || slices.Contains(protocol.AgentProtocols, v) {
			return Pass
		}
		return Held(KindAgentVersion, fmt.Sprintf("its agent speaks node protocol %q; this operator speaks %s: upgrade the operator first, or roll the agent back (docs/install.md, Upgrade)", truncateValue(v, 32), strings.Join(protocol.AgentProtocols, " and ")), 0)
	}}

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
var FailedVersionGate = Gate{Name: "failed-version", Scope: ScopeNode, Plan: PlanCheck,
	Doc: "it asks for the OS version it once rebooted for and came back without",
	Check: func(_ context.Context, in Input) Verdict {
		if v := in.Node.FailedVersion; v == "" || in.Node.AskedVersion != v {
			return Pass
		}
		return Held(KindFailedVersion, fmt.Sprintf("came back on its old version after rebooting for %s; not asked again for %s until a person removes annotation %s", in.Node.FailedVersion, in.Node.FailedVersion, protocol.FailedVersion), 0)
	}}

// UndrainableGate holds a node whose last drain failed under --drain-failure-policy=skip until
// its policy's UndrainableRetry has passed since; it then goes behind the nodes that waited longer (its wait began anew).
var UndrainableGate = Gate{Name: "undrainable", Scope: ScopeNode, Plan: PlanCheck,
	Doc: "its last drain failed under `--drain-failure-policy=skip` less than `--undrainable-retry` ago",
	Check: func(_ context.Context, in Input) Verdict {
		retry := in.pol().UndrainableRetry
		at := in.Node.UndrainableAt
		if at.IsZero() || !in.Now.Before(at.Add(retry)) {
			return Pass
		}
		next := at.Add(retry)
		return Held(KindUndrainable, fmt.Sprintf("its drain failed at %s (--drain-failure-policy=skip); retried after %s (--undrainable-retry)",
			at.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339)), next.Sub(in.Now)+10*time.Millisecond)
	}}

// FleetBlockersGate holds the node on the first fleet-wide blocker that blocks. Every one was asked
// (not only up to the first that blocks, so the published status lists all that are active), once for
// the decision, before the Admitter's lock (Fleet.blocking).
var FleetBlockersGate = Gate{Name: "fleet-blockers", Scope: ScopeFleet, Plan: PlanNone,
	Doc: "a fleet-wide blocker blocks: a Prometheus alert, a pod anywhere in the cluster, a health check",
	Check: func(_ context.Context, in Input) Verdict {
		in.Fleet.ActiveBlockers = map[string]string{}
		first := Pass
		for _, r := range in.Fleet.blocking {
			in.Fleet.ActiveBlockers[r.Name] = r.Reason
			if first.Passes() {
				// Alerts clear without any Node changing: look again after the blockers' cache TTL.
				first = Held(Kind(r.Name), r.Reason, in.Fleet.retry)
			}
		}
		return first
	}}

// PoolBlockersGate holds the nodes of a policy while one of the policy's own fleet-wide blockers (its
// health checks) blocks. Asked once per plan generation, outside the Admitter's lock, like the fleet's.
var PoolBlockersGate = Gate{Name: "pool-blockers", Scope: ScopePool, Plan: PlanFilter,
	Doc: "one of its RebootPolicy's own health checks does not hold (`spec.healthChecks`)",
	Check: func(_ context.Context, in Input) Verdict {
		p := in.pol()
		if rs := in.Fleet.poolBlocking[p.Name]; len(rs) > 0 {
			return Held(Kind(rs[0].Name), "policy "+p.Name+": "+rs[0].Reason, in.Fleet.retry)
		}
		return Pass
	}}

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
var OrderGate = Gate{Name: "order", Scope: ScopeNode, Plan: PlanFilter,
	Doc: "`--control-plane-order` keeps it back while the others wait or are in their cycle",
	Check: func(_ context.Context, in Input) Verdict {
		o := in.Fleet.Order
		if !o.keptBack(in.Node, in.Fleet.Snapshot) {
			return Pass
		}
		if o == OrderWorkersFirst {
			return Held(KindOrder, "workers first (--control-plane-order=workers-first)", 0)
		}
		return Held(KindOrder, "control plane first (--control-plane-order=control-plane-first)", 0)
	}}

// BudgetGate lets a node pass when the plan (every waiting node ordered, each admitted while all its
// pools have room) admits it or found room for it but a per-node blocker holds it. Waiting for budget
// needs no timer: the node that frees it makes the controller look again.
var BudgetGate = Gate{Name: "budget", Scope: ScopeFleet, Plan: PlanNone,
	Doc: "the plan (waiting nodes in queue order, each admitted while all its pools have room) does not admit it: a pool is full, or settling nodes hold its slots",
	Check: func(_ context.Context, in Input) Verdict {
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

// NodeBlockersGate holds a node a per-node blocker holds. The plan asks the blockers, in admission
// order, only about nodes the budget has room for (a held node takes no budget from the others); the
// decision reads the plan's answer, which is also that of the checks above that only the plan asks
// (its canaries).
var NodeBlockersGate = Gate{Name: "node-blockers", Scope: ScopeNode, Plan: PlanCheck,
	Doc: "a per-node blocker holds it (pods on the node, its RebootPolicy's `blockingPodSelectors`, minimum Ready nodes, a steering label), or its version's canaries go first; asked by the plan only while the budget has room for it",
	Check: func(ctx context.Context, in Input) Verdict {
		if in.Planning != nil {
			n, ok := in.Fleet.lookup(in.Name)
			if !ok {
				return Held(KindGone, "node gone", 0)
			}
			if rs := CheckAll(ctx, in.Fleet.perNode, n); len(rs) > 0 {
				return Held(Kind(rs[0].Name), rs[0].Reason, in.Fleet.retry)
			}
			if rs := CheckAll(ctx, in.Fleet.pools[in.pol().Name].perNode, n); len(rs) > 0 {
				return Held(Kind(rs[0].Name), "policy "+in.pol().Name+": "+rs[0].Reason, in.Fleet.retry)
			}
			return Pass
		}
		if v, ok := in.Fleet.Plan().HeldBy[in.Name]; ok {
			return v
		}
		return Pass
	}}
