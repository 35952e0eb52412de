package admission

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/operator/budget"
)

// Config configures an Admitter.
type Config struct {
	Limits Limits
	Order  Order
	// Policy is the reboot policy of every node (nil: no window, no canaries).
	Policy *Rules
	// Blockers are the fleet's (its flags'): fleet-wide ones hold every node, per-node ones are asked
	// by the plan.
	Blockers []Blocker
	// CheckTimeout bounds one blocker's Check (DefaultCheckTimeout when 0).
	CheckTimeout time.Duration
	// BlockerRetry: how soon a node held by a blocker is asked about again (DefaultBlockerRetry when 0).
	BlockerRetry time.Duration
}

// planTTL bounds how long one plan, and the fleet-wide blockers' answers it was built with, are reused
// while nothing it reads changed: blockers (pods, alerts, min-ready) may change without the index
// noticing.
const planTTL = time.Second

// Admitter decides admissions one at a time against its Index.
type Admitter struct {
	index   *Index
	limits  Limits
	order   Order
	chain   Chain
	policy  *Rules // the default policy
	perNode []Blocker
	fleet   []Blocker     // fleet-wide
	retry   time.Duration // a blocker's hold
	// checkTimeout bounds every blocker (Config.CheckTimeout), the policies' too.
	checkTimeout time.Duration

	// answersMu guards answers: the fleet-wide blockers' answers, gathered at most once per plan
	// generation and without holding mu (blockers may take up to CheckTimeout).
	answersMu sync.Mutex
	answers   fleetAnswers

	mu   sync.Mutex // one decision at a time; guards snap, plan, policies and limits.Policies
	snap *Snapshot  // the index as last copied, reused while its generation has not moved
	plan *Plan
	// policies: the RebootPolicies' admission policies by name (SetPolicies); canaryOn: any policy
	// has canaries or halts.
	policies map[string]*Rules
	canaryOn bool
	// pools: each policy's own blockers, bounded and split (SetPolicies); epoch counts SetPolicies, so
	// answers gathered for an older set are not reused.
	pools map[string]poolBlockers
	epoch uint64
	// versions: the fleet by OS version for snap's generation (canaries on only).
	versions    map[string]*VersionStats
	versionsGen uint64
}

// fleetAnswers are the fleet-wide blockers' answers for one index generation, taken at At: the
// fleet's, and each policy's own (by name, only those that block).
type fleetAnswers struct {
	gen     uint64
	epoch   uint64
	at      time.Time
	ok      bool
	results []Result
	pools   map[string][]Result
}

// poolBlockers are one policy's own blockers, bounded, fleet-wide and per node.
type poolBlockers struct{ fleet, perNode []Blocker }

// NewAdmitter builds the chain (Gates) over index for cfg. Every blocker is Bounded by
// cfg.CheckTimeout.
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
	if cfg.Policy == nil {
		cfg.Policy = &Rules{}
	}
	return &Admitter{index: index, limits: cfg.Limits, order: cfg.Order, chain: Gates, policy: cfg.Policy,
		perNode: perNode, fleet: fleetWide, retry: cfg.BlockerRetry, canaryOn: cfg.Policy.Canary.On(), checkTimeout: cfg.CheckTimeout}
}

// SetPolicies replaces the RebootPolicies' admission policies and their own budgets, by name (the
// default policy stays). The next decision plans anew.
func (a *Admitter) SetPolicies(byName map[string]*Rules, limits map[string]budget.Max) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.policies, a.limits.Policies, a.plan = byName, limits, nil
	a.canaryOn = a.policy.Canary.On()
	a.pools = map[string]poolBlockers{}
	for name, p := range byName {
		a.canaryOn = a.canaryOn || p.Canary.On()
		var bs []Blocker
		for _, b := range p.Blockers {
			bs = append(bs, Bounded(b, a.checkTimeout))
		}
		if len(bs) > 0 {
			fleetWide, perNode := Split(bs)
			a.pools[name] = poolBlockers{fleet: fleetWide, perNode: perNode}
		}
	}
	a.epoch++ // the policies' blockers changed: answers for the old ones are not reused
}

// Index is the index the Admitter decides against.
func (a *Admitter) Index() *Index { return a.index }

// Fleet is what the gates of one decision share: the index as it was when the decision began, the
// pause switch, the fleet's settings and answers, and the plan (built on first use).
type Fleet struct {
	Snapshot *Snapshot
	Switch   Switch
	// Order is --control-plane-order.
	Order Order
	// ActiveBlockers are the fleet-wide blockers that block (name -> reason), set by
	// FleetBlockersGate; nil when the chain stopped before it.
	ActiveBlockers map[string]string
	blocking       []Result // the fleet-wide blockers' answers for this decision
	perNode        []Blocker
	// poolBlocking: each policy's fleet-wide blockers that block, by name; pools: each policy's own
	// blockers (its per-node ones are asked by the plan).
	poolBlocking map[string][]Result
	pools        map[string]poolBlockers
	retry        time.Duration
	lookup       func(name string) (*corev1.Node, bool)
	plan         func() *Plan
	versions     func() map[string]*VersionStats
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
	// Policy: the policy an admitted node was admitted under (pinned on it for its cycle).
	Policy *Rules
}

// Admitted reports whether the node may start its cycle now.
func (d Decision) Admitted() bool { return d.Passes() }

// Decide runs the chain for name, whose Node is obj; lookup gives the Node of any other waiting node
// for per-node blockers (ok false: gone). An admitted node is reserved in every pool before Decide
// returns, so the next decision counts it even before its write lands.
func (a *Admitter) Decide(ctx context.Context, name string, obj *corev1.Node, sw Switch, now time.Time,
	lookup func(name string) (*corev1.Node, bool)) Decision {
	a.mu.Lock()
	pools, epoch := a.pools, a.epoch
	a.mu.Unlock()
	answers := a.fleetBlocking(ctx, obj, now, pools, epoch)
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
	f := &Fleet{Snapshot: s, Switch: sw, Order: a.order, blocking: answers.results, poolBlocking: answers.pools, pools: a.pools,
		perNode: a.perNode, retry: a.retry, lookup: lookup}
	f.versions = func() map[string]*VersionStats {
		if !a.canaryOn {
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
		a.plan = a.chain.Plan(ctx, s, a.limits, f, now, a.policyOf)
		return a.plan
	}
	p := a.policyOf(name, e)
	v := a.chain.Run(ctx, Input{Name: name, Node: e, Obj: obj, Now: now, Policy: p, Fleet: f})
	d := Decision{Verdict: v, ActiveBlockers: f.ActiveBlockers}
	if v.Passes() {
		d.Release = a.index.ReserveAs(name, p.Name)
		d.Policy = p
	}
	return d
}

// policyOf is the reboot policy of a node (mu held): its RebootPolicy's, else the default. A policy the
// node names that is gone (deleted since it was indexed) holds it until it is indexed again.
func (a *Admitter) policyOf(_ string, e Node) *Rules {
	if e.Policy == "" {
		return a.policy
	}
	if p := a.policies[e.Policy]; p != nil {
		return p
	}
	return &Rules{Name: e.Policy, Invalid: "no such RebootPolicy (deleted?)"}
}

// fleetBlocking asks every fleet-wide blocker -- the fleet's, and each policy's own -- once per plan
// generation (the index's generation, for at most planTTL) and returns the answers; it holds no
// admission lock while they run, only its own, so that two decisions do not ask a blocker twice (a
// Bounded blocker still running would hold the second).
func (a *Admitter) fleetBlocking(ctx context.Context, obj *corev1.Node, now time.Time, pools map[string]poolBlockers, epoch uint64) fleetAnswers {
	if len(a.fleet) == 0 && len(pools) == 0 {
		return fleetAnswers{}
	}
	a.answersMu.Lock()
	defer a.answersMu.Unlock()
	gen := a.index.Gen()
	if c := a.answers; c.ok && c.gen == gen && c.epoch == epoch && !now.Before(c.at) && now.Sub(c.at) < planTTL {
		return c
	}
	ans := fleetAnswers{gen: gen, epoch: epoch, at: now, ok: true}
	// The policies' blockers beside the fleet's: each is bounded, and one policy's slow health check
	// must not add up with the others'.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, b := range pools {
		if len(b.fleet) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rs := CheckAll(ctx, b.fleet, obj); len(rs) > 0 {
				mu.Lock()
				if ans.pools == nil {
					ans.pools = map[string][]Result{}
				}
				ans.pools[name] = rs
				mu.Unlock()
			}
		}()
	}
	results := CheckAll(ctx, a.fleet, obj)
	wg.Wait()
	ans.results = results
	a.answers = ans
	return ans
}

// Pools are the budgets as admission counts them now (reservations included).
func (a *Admitter) Pools() []BudgetPool {
	s := a.index.Snapshot()
	a.mu.Lock()
	l := a.limits
	a.mu.Unlock()
	return s.Pools(l)
}
