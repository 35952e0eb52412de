package admission

// A frozen copy of the admission chain and budget plan as they were before the policy became one value
// (wave 3's main, ce6f19c): TestChainMatchesLegacy runs both over the same random fleets and requires the
// same answer from every decision. Do not edit it to make that test pass.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/budget"
)

// legacyInput is what every gate sees for one decision.
type legacyInput struct {
	Name string
	Node Node         // its entry
	Obj  *corev1.Node // the Node as the controller sees it, for blockers
	Now  time.Time
	// legacyFleet is the rest of the fleet, shared by the gates of one decision.
	legacyFleet *legacyFleet
}

// legacyGate is one condition of admission: it lets the node pass (Pass) or holds it. Gates run in order;
// the first that holds decides.
type legacyGate struct {
	Name        string
	legacyCheck func(ctx context.Context, in legacyInput) Verdict
}

// legacyChain is the ordered gates. The order is the order a person would want to read them: when
// (window), whether at all (pause, fleet-wide blockers), then who (control-plane order, budgets), then
// per-node blockers in admission order.
type legacyChain []legacyGate

// legacyRun returns the first verdict that holds the node, or Pass.
func (c legacyChain) legacyRun(ctx context.Context, in legacyInput) Verdict {
	for _, g := range c {
		if v := g.legacyCheck(ctx, in); !v.Passes() {
			return v
		}
	}
	return Pass
}

// legacyWindowGate holds every node while s is closed (s nil: always open).
func legacyWindowGate(s Schedule) legacyGate {
	return legacyGate{"window", func(_ context.Context, in legacyInput) Verdict {
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

// legacyPauseGate holds a node while the switch pauses the fleet or its group.
func legacyPauseGate() legacyGate {
	return legacyGate{"pause", func(_ context.Context, in legacyInput) Verdict {
		for _, g := range in.Node.Groups() {
			if held, why := in.legacyFleet.Switch.Holds(g); held {
				return Held(KindPaused, why, 0)
			}
		}
		return Pass
	}}
}

// legacyAgentProtocolGate holds a node whose agent speaks a node protocol this operator does not: an agent
// upgraded before the operator may mean something else by the keys it writes, and a reboot is not
// the place to find out. The previous protocol is spoken too, so agents may also lag the operator.
func legacyAgentProtocolGate() legacyGate {
	return legacyGate{"agent-version", func(_ context.Context, in legacyInput) Verdict {
		v := in.Node.AgentProtocol
		if v == "" || slices.Contains(protocol.AgentProtocols, v) {
			return Pass
		}
		return Held(KindAgentVersion, fmt.Sprintf("its agent speaks node protocol %q; this operator speaks %s: upgrade the operator first, or roll the agent back (docs/install.md, Upgrade)", truncateValue(v, 32), strings.Join(protocol.AgentProtocols, " and ")), 0)
	}}
}

// legacyFailedVersionGate holds a node asking for the OS version it once rebooted for and came back without
// (a rolled-back update): rebooting it again for that version would roll back again. A person removes
// failed-version to let it try again; a node asking for another version goes.
func legacyFailedVersionGate() legacyGate {
	return legacyGate{"failed-version", func(_ context.Context, in legacyInput) Verdict {
		if v := in.Node.FailedVersion; v == "" || in.Node.AskedVersion != v {
			return Pass
		}
		return Held(KindFailedVersion, fmt.Sprintf("came back on its old version after rebooting for %s; not asked again for %s until a person removes annotation %s", in.Node.FailedVersion, in.Node.FailedVersion, protocol.FailedVersion), 0)
	}}
}

// legacyUndrainableGate holds a node whose last drain failed under --drain-failure-policy=skip until
// retry has passed since; it then goes behind the nodes that waited longer (its wait began anew).
func legacyUndrainableGate(retry time.Duration) legacyGate {
	return legacyGate{"undrainable", func(_ context.Context, in legacyInput) Verdict {
		at := in.Node.UndrainableAt
		if at.IsZero() || !in.Now.Before(at.Add(retry)) {
			return Pass
		}
		next := at.Add(retry)
		return Held(KindUndrainable, fmt.Sprintf("its drain failed at %s (--drain-failure-policy=skip); retried after %s (--undrainable-retry)",
			at.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339)), next.Sub(in.Now)+10*time.Millisecond)
	}}
}

// legacyFleetBlockersGate asks every fleet-wide blocker (not only up to the first that blocks, so the
// published status lists all that are active) and holds the node on the first that blocks.
func legacyFleetBlockersGate(blockers []Blocker, retry time.Duration) legacyGate {
	return legacyGate{"fleet-blockers", func(ctx context.Context, in legacyInput) Verdict {
		active := map[string]string{}
		first := Pass
		for _, r := range CheckAll(ctx, blockers, in.Obj) {
			active[r.Name] = r.Reason
			if first.Passes() {
				// Alerts clear without any Node changing: look again after the blockers' cache TTL.
				first = Held(Kind(r.Name), r.Reason, retry)
			}
		}
		in.legacyFleet.ActiveBlockers = active
		return first
	}}
}

// legacyOrderGate holds control-plane nodes while workers are busy, or the other way round.
func legacyOrderGate(o Order) legacyGate {
	return legacyGate{"order", func(_ context.Context, in legacyInput) Verdict {
		if !o.keptBack(in.Node, in.legacyFleet.Snapshot) {
			return Pass
		}
		if o == OrderWorkersFirst {
			return Held(KindOrder, "workers first (--control-plane-order=workers-first)", 0)
		}
		return Held(KindOrder, "control plane first (--control-plane-order=control-plane-first)", 0)
	}}
}

// legacyBudgetGate lets a node pass when the plan (every waiting node ordered, each admitted while all its
// pools have room) admits it or found room for it but a per-node blocker holds it. Waiting for budget
// needs no timer: the node that frees it makes the controller look again.
func legacyBudgetGate() legacyGate {
	return legacyGate{"budget", func(_ context.Context, in legacyInput) Verdict {
		p := in.legacyFleet.legacyPlan()
		if p.Admitted[in.Name] {
			return Pass
		}
		if _, ok := p.HeldBy[in.Name]; ok {
			return Pass
		}
		// Which pool is full, for a person reading the node: after the plan's admissions.
		if v := legacySettlingVerdict(in); !v.Passes() {
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

// legacySettlingVerdict holds the node with KindSettling when every full pool it is in would have room but
// for nodes settling after their cycle; the reason says why they settle (not which they are, so it
// stays the same while nodes come and go).
func legacySettlingVerdict(in legacyInput) Verdict {
	p, s := in.legacyFleet.legacyPlan(), in.legacyFleet.Snapshot
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

// legacyNodeBlockersGate holds a node a per-node blocker holds (asked by the plan, in admission order, only
// for nodes the budget has room for: a held node takes no budget from the others).
func legacyNodeBlockersGate() legacyGate {
	return legacyGate{"node-blockers", func(_ context.Context, in legacyInput) Verdict {
		if v, ok := in.legacyFleet.legacyPlan().HeldBy[in.Name]; ok {
			return v
		}
		return Pass
	}}
}

// legacyConfig configures an legacyAdmitter.
type legacyConfig struct {
	Limits   Limits
	Order    Order
	Schedule Schedule // nil: always open
	Blockers []Blocker
	// CheckTimeout bounds one blocker's legacyCheck (DefaultCheckTimeout when 0).
	CheckTimeout time.Duration
	// BlockerRetry: how soon a node held by a blocker is asked about again (DefaultBlockerRetry when 0).
	BlockerRetry time.Duration
	// Canary: per-version canaries and halts (zero: off).
	Canary Canary
	// UndrainableRetry: how long a node whose drain failed under --drain-failure-policy=skip waits
	// before it is admitted again.
	UndrainableRetry time.Duration
}

// legacyAdmitter decides admissions one at a time against its Index.
type legacyAdmitter struct {
	index   *Index
	limits  Limits
	order   Order
	chain   legacyChain
	perNode []Blocker
	fleet   []Blocker // fleet-wide
	canary  Canary
	retry   time.Duration // a blocker's hold
	// own: gates that hold one node for reasons of its own (agent-version, failed-version, undrainable); the plan
	// asks them too, so a node they hold takes no budget from the others.
	own []legacyGate

	mu   sync.Mutex // one decision at a time; guards snap and plan
	snap *Snapshot  // the index as last copied, reused while its generation has not moved
	plan *legacyPlan
	// versions: the fleet by OS version for snap's generation (canaries on only).
	versions    map[string]*VersionStats
	versionsGen uint64
}

// legacyNewAdmitter builds the chain of cfg over index: window, pause, fleet-wide blockers, order, budget,
// per-node blockers. Every blocker is Bounded by cfg.CheckTimeout.
func legacyNewAdmitter(cfg legacyConfig, index *Index) *legacyAdmitter {
	var bs []Blocker
	for _, b := range cfg.Blockers {
		bs = append(bs, Bounded(b, cfg.CheckTimeout))
	}
	fleetWide, perNode := Split(bs)
	if cfg.Order == "" {
		cfg.Order = OrderNone
	}
	if cfg.BlockerRetry <= 0 {
		cfg.BlockerRetry = DefaultBlockerRetry
	}
	a := &legacyAdmitter{index: index, limits: cfg.Limits, order: cfg.Order, perNode: perNode, fleet: fleetWide, canary: cfg.Canary, retry: cfg.BlockerRetry}
	a.own = []legacyGate{legacyAgentProtocolGate(), legacyFailedVersionGate(), legacyUndrainableGate(cfg.UndrainableRetry)}
	a.chain = append(append(legacyChain{legacyWindowGate(cfg.Schedule), legacyPauseGate()}, a.own...),
		a.legacyVersionHaltGate(),
		legacyFleetBlockersGate(fleetWide, cfg.BlockerRetry),
		legacyOrderGate(cfg.Order),
		legacyBudgetGate(),
		legacyNodeBlockersGate(),
	)
	return a
}

// legacyFleet is what the gates of one decision share: the index as it was when the decision began, the
// pause switch, and the plan (built on first use).
type legacyFleet struct {
	Snapshot *Snapshot
	Switch   Switch
	// ActiveBlockers are the fleet-wide blockers that block (name -> reason), set by
	// legacyFleetBlockersGate; nil when the chain stopped before it.
	ActiveBlockers map[string]string
	plan           func() *legacyPlan
	versions       func() map[string]*VersionStats
}

// legacyVersions is the fleet by OS version (nil when canaries and halts are off).
func (f *legacyFleet) legacyVersions() map[string]*VersionStats {
	if f.versions == nil {
		return nil
	}
	return f.versions()
}

// legacyPlan is the budget plan for this decision.
func (f *legacyFleet) legacyPlan() *legacyPlan { return f.plan() }

// legacyDecide runs the chain for name, whose Node is obj; lookup gives the Node of any other waiting node
// for per-node blockers (ok false: gone). An admitted node is reserved in every pool before legacyDecide
// returns, so the next decision counts it even before its write lands.
func (a *legacyAdmitter) legacyDecide(ctx context.Context, name string, obj *corev1.Node, sw Switch, now time.Time,
	lookup func(name string) (*corev1.Node, bool)) Decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.snap == nil || a.snap.Gen != a.index.Gen() {
		s := a.index.Snapshot()
		a.snap = &s
	}
	s := a.snap // read-only from here on: gates and plans never change it
	e, ok := s.Waiting[name]
	if !ok {
		return Decision{Verdict: Held(KindGone, "no longer waiting", 0)}
	}
	f := &legacyFleet{Snapshot: s, Switch: sw}
	f.versions = func() map[string]*VersionStats {
		if !a.canary.On() {
			return nil
		}
		if a.versions == nil || a.versionsGen != s.Gen {
			a.versions, a.versionsGen = VersionsOf(a.index.Entries()), s.Gen
		}
		return a.versions
	}
	f.plan = func() *legacyPlan {
		if p := a.plan; p != nil && p.Gen == s.Gen && !now.Before(p.At) && now.Sub(p.At) < planTTL {
			return p
		}
		extra := map[string]int{} // nodes this plan admits, by the version they ask for
		a.plan = legacyBuildPlan(s, a.limits, a.order, sw, now, func(cand string) Verdict {
			e := s.Waiting[cand]
			for _, g := range a.own {
				if v := g.legacyCheck(ctx, legacyInput{Name: cand, Node: e, Now: now, legacyFleet: f}); !v.Passes() {
					return v
				}
			}
			if v := a.legacyVersionCheck(e, sw, now, f.legacyVersions(), extra); !v.Passes() {
				return v
			}
			n, ok := lookup(cand)
			if !ok {
				return Held(KindGone, "node gone", 0)
			}
			if rs := CheckAll(ctx, a.perNode, n); len(rs) > 0 {
				return Held(Kind(rs[0].Name), rs[0].Reason, a.retry)
			}
			if e.AskedVersion != "" {
				extra[e.AskedVersion]++ // admitted: a canary the next legacyCandidates see
			}
			return Pass
		})
		return a.plan
	}
	v := a.chain.legacyRun(ctx, legacyInput{Name: name, Node: e, Obj: obj, Now: now, legacyFleet: f})
	d := Decision{Verdict: v, ActiveBlockers: f.ActiveBlockers}
	if v.Passes() {
		d.Release = a.index.Reserve(name)
	}
	return d
}

// legacyPlan is the budget's answer for every waiting node at once, computed once per change of the fleet
// (Index.Gen) rather than once per waiting node.
type legacyPlan struct {
	Gen      uint64
	At       time.Time
	Admitted map[string]bool
	HeldBy   map[string]Verdict // per-node blockers that held a node the budget had room for
	Full     map[string]bool    // pool keys full after the admissions above
	// Settled: full pool keys that would have room but for nodes settling after their cycle.
	Settled map[string]bool
}

// legacyCandidates are the waiting nodes the plan considers: all but those reboot-paused, kept back by the
// control-plane order or held by the switch (their fleet or group is paused), which must not take budget
// from the others. A node's wait began when the index first saw it asking (now when not known).
func legacyCandidates(s *Snapshot, o Order, sw Switch, now time.Time) []budget.Candidate {
	var cands []budget.Candidate
	for name, e := range s.Waiting {
		if e.Paused || o.keptBack(e, s) {
			continue
		}
		if held, _ := sw.Holds(e.Group); held {
			continue
		}
		since, ok := s.Since[name]
		if !ok {
			since = now
		}
		keys := e.PoolKeys()
		cands = append(cands, budget.Candidate{Name: name, Unavailable: e.Counts, Pools: keys[1:], Since: since})
	}
	return cands
}

// legacyBuildPlan takes the legacyCandidates in admission order (budget.Order: already unavailable first, then the
// longest waiting; Queue) and admits each while every pool it is in has room. check is asked, in that
// order, about each node the budget has room for; a node it holds is not admitted and uses nothing.
func legacyBuildPlan(s *Snapshot, l Limits, o Order, sw Switch, now time.Time, check func(name string) Verdict) *legacyPlan {
	pools := map[string]budget.Usage{}
	for _, p := range s.Pools(l) {
		if p.Limited {
			pools[p.Key] = budget.Usage{Limit: p.Limit, Used: p.Used}
		}
	}
	cands := legacyCandidates(s, o, sw, now)
	p := &legacyPlan{Gen: s.Gen, At: now, Admitted: map[string]bool{}, HeldBy: map[string]Verdict{}, Full: map[string]bool{}, Settled: map[string]bool{}}
	skip := func(name string) bool {
		if v := check(name); !v.Passes() {
			p.HeldBy[name] = v
			return true
		}
		return false
	}
	used := map[string]int{}
	for k, pool := range pools {
		used[k] = pool.Used
	}
	for _, name := range budget.AdmitPools(pools, cands, skip) {
		p.Admitted[name] = true
		if e := s.Waiting[name]; !e.Occupies() {
			for _, k := range e.PoolKeys() {
				used[k]++
			}
		}
	}
	settling := map[string]int{}
	for _, e := range s.Settling {
		for _, k := range e.PoolKeys() {
			settling[k]++
		}
	}
	for k, pool := range pools {
		if used[k] >= pool.Limit {
			p.Full[k] = true
			if settling[k] > 0 && used[k]-settling[k] < pool.Limit {
				p.Settled[k] = true
			}
		}
	}
	return p
}

func (a *legacyAdmitter) legacyVersionCheck(e Node, sw Switch, now time.Time, stats map[string]*VersionStats, extra map[string]int) Verdict {
	v := e.AskedVersion
	if !a.canary.On() || v == "" {
		return Pass
	}
	mem, _ := sw.(Memory)
	var resumed time.Time
	if mem != nil {
		resumed = mem.VersionResumedAt(v)
	}
	var s VersionStats
	if p := stats[v]; p != nil {
		s = *p
	}
	s = WithMemory(s, v, mem)
	return versionVerdict(v, CanaryOf(s, a.canary, resumed, now, extra[v]), a.canary, now)
}

func (a *legacyAdmitter) legacyVersionHaltGate() legacyGate {
	return legacyGate{"version-halted", func(_ context.Context, in legacyInput) Verdict {
		if v := a.legacyVersionCheck(in.Node, in.legacyFleet.Switch, in.Now, in.legacyFleet.legacyVersions(), nil); v.Kind == KindVersionHalted {
			return v
		}
		return Pass
	}}
}
