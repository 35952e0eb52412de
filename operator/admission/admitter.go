package admission

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Config configures an Admitter.
type Config struct {
	Limits   Limits
	Order    Order
	Schedule Schedule // nil: always open
	Blockers []Blocker
	// CheckTimeout bounds one blocker's Check (DefaultCheckTimeout when 0).
	CheckTimeout time.Duration
	// BlockerRetry: how soon a node held by a blocker is asked about again (DefaultBlockerRetry when 0).
	BlockerRetry time.Duration
	// Canary: per-version canaries and halts (zero: off).
	Canary Canary
	// UndrainableRetry: how long a node whose drain failed under --drain-failure-policy=skip waits
	// before it is admitted again.
	UndrainableRetry time.Duration
}

// planTTL bounds how long one plan is reused while nothing it reads changed: per-node blockers (pods,
// min-ready) may change without the index noticing.
const planTTL = time.Second

// Admitter decides admissions one at a time against its Index.
type Admitter struct {
	index   *Index
	limits  Limits
	order   Order
	chain   Chain
	perNode []Blocker
	fleet   []Blocker // fleet-wide
	canary  Canary
	retry   time.Duration // a blocker's hold
	// own: gates that hold one node for reasons of its own (agent-version, failed-version, undrainable); the plan
	// asks them too, so a node they hold takes no budget from the others.
	own []Gate

	mu   sync.Mutex // one decision at a time; guards snap and plan
	snap *Snapshot  // the index as last copied, reused while its generation has not moved
	plan *Plan
	// versions: the fleet by OS version for snap's generation (canaries on only).
	versions    map[string]*VersionStats
	versionsGen uint64
}

// NewAdmitter builds the chain of cfg over index: window, pause, fleet-wide blockers, order, budget,
// per-node blockers. Every blocker is Bounded by cfg.CheckTimeout.
func NewAdmitter(cfg Config, index *Index) *Admitter {
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
	a := &Admitter{index: index, limits: cfg.Limits, order: cfg.Order, perNode: perNode, fleet: fleetWide, canary: cfg.Canary, retry: cfg.BlockerRetry}
	a.own = []Gate{AgentProtocolGate(), FailedVersionGate(), UndrainableGate(cfg.UndrainableRetry)}
	a.chain = append(append(Chain{WindowGate(cfg.Schedule), PauseGate()}, a.own...),
		a.versionHaltGate(),
		FleetBlockersGate(fleetWide, cfg.BlockerRetry),
		OrderGate(cfg.Order),
		BudgetGate(),
		NodeBlockersGate(),
	)
	return a
}

// Index is the index the Admitter decides against.
func (a *Admitter) Index() *Index { return a.index }

// Fleet is what the gates of one decision share: the index as it was when the decision began, the
// pause switch, and the plan (built on first use).
type Fleet struct {
	Snapshot *Snapshot
	Switch   Switch
	// ActiveBlockers are the fleet-wide blockers that block (name -> reason), set by
	// FleetBlockersGate; nil when the chain stopped before it.
	ActiveBlockers map[string]string
	plan           func() *Plan
	versions       func() map[string]*VersionStats
}

// Versions is the fleet by OS version (nil when canaries and halts are off).
func (f *Fleet) Versions() map[string]*VersionStats {
	if f.versions == nil {
		return nil
	}
	return f.versions()
}

// Plan is the budget plan for this decision.
func (f *Fleet) Plan() *Plan { return f.plan() }

// Decision is the answer for one node.
type Decision struct {
	Verdict // Passes() when admitted
	// ActiveBlockers: see Fleet.ActiveBlockers.
	ActiveBlockers map[string]string
	// Release ends the reservation an admitted node holds in every pool; call it once its admission
	// was written (and the write is in the index) or failed. Nil when not admitted.
	Release func() bool
}

// Admitted reports whether the node may start its cycle now.
func (d Decision) Admitted() bool { return d.Passes() }

// Decide runs the chain for name, whose Node is obj; lookup gives the Node of any other waiting node
// for per-node blockers (ok false: gone). An admitted node is reserved in every pool before Decide
// returns, so the next decision counts it even before its write lands.
func (a *Admitter) Decide(ctx context.Context, name string, obj *corev1.Node, sw Switch, now time.Time,
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
	f := &Fleet{Snapshot: s, Switch: sw}
	f.versions = func() map[string]*VersionStats {
		if !a.canary.On() {
			return nil
		}
		if a.versions == nil || a.versionsGen != s.Gen {
			a.versions, a.versionsGen = VersionsOf(a.index.Entries()), s.Gen
		}
		return a.versions
	}
	f.plan = func() *Plan {
		if p := a.plan; p != nil && p.Gen == s.Gen && !now.Before(p.At) && now.Sub(p.At) < planTTL {
			return p
		}
		extra := map[string]int{} // nodes this plan admits, by the version they ask for
		a.plan = BuildPlan(s, a.limits, a.order, sw, now, func(cand string) Verdict {
			e := s.Waiting[cand]
			for _, g := range a.own {
				if v := g.Check(ctx, Input{Name: cand, Node: e, Now: now, Fleet: f}); !v.Passes() {
					return v
				}
			}
			if v := a.versionCheck(e, sw, now, f.Versions(), extra); !v.Passes() {
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
				extra[e.AskedVersion]++ // admitted: a canary the next candidates see
			}
			return Pass
		})
		return a.plan
	}
	v := a.chain.Run(ctx, Input{Name: name, Node: e, Obj: obj, Now: now, Fleet: f})
	d := Decision{Verdict: v, ActiveBlockers: f.ActiveBlockers}
	if v.Passes() {
		d.Release = a.index.Reserve(name)
	}
	return d
}

// Pools are the budgets as admission counts them now (reservations included).
func (a *Admitter) Pools() []Pool {
	s := a.index.Snapshot()
	return s.Pools(a.limits)
}
