// Package policies is the RebootPolicy runtime, a controller of its own beside the node controller:
// it finds out whether the resource is there, watches the RebootPolicies, compiles them over the
// flags' policy into the pools (policy.PoolSet), holds the nodes of a deleted one for a grace
// period, keeps every compiled generation a node's cycle is pinned to, answers which policy a node
// runs under (For), and writes each RebootPolicy's status from its own queue, keyed by policy name.
// It tells the node controller what changed through the Nodes interface it owns.
package policies

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/updateconf"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/budget"
	"github.com/slipway-dev/slipway/operator/policy"
)

// DefaultMaxPolicies is Config.MaxPolicies's default: the RebootPolicies a cluster may have. Each
// change recompiles all of them, and every node's decision looks through them; the oldest this many
// are compiled, the newer ones refused (Accepted=False, reason TooMany) and their nodes held.
const DefaultMaxPolicies = 100

// TooMany begins the refusal of a policy past MaxPolicies (the Accepted condition's reason then).
const TooMany = "TooMany"

// DefaultDeleteGrace is Config.DeleteGrace's default.
const DefaultDeleteGrace = 30 * time.Second

// Nodes is what the runtime needs of the node controller.
type Nodes interface {
	// Reindex brings every node's admission entry up to date under the pools now in force and
	// returns the pins (protocol.AdmittedPolicy values) the nodes carry.
	Reindex() (pins map[string]bool)
	// SetRules hands the pools' admission rules and budgets to admission.
	SetRules(byName map[string]*admission.Rules, limits map[string]budget.Max)
	// Waiting: the waiting nodes should be looked at again.
	Waiting()
	// All: every node should be looked at again (what a pool declares for each node's update.conf
	// changed: idle nodes too must be told).
	All()
	// Memory is the fleet's memory as admissions read it (the canaries of the status).
	Memory() admission.Memory
}

// Config wires a Runtime.
type Config struct {
	// Dynamic reads the RebootPolicies and writes their status; nil: no pools, the flags' policy for
	// every node.
	Dynamic dynamic.Interface
	// Flags is the flags' policy: what a node in no pool runs under, and what every pool is compiled
	// over.
	Flags *policy.Policy
	// DeleteGrace: how long the nodes of a deleted RebootPolicy stay held before they move to the
	// next matching policy (DefaultDeleteGrace when 0): a policy deleted and created again (kubectl
	// replace --force, Helm's hooks, GitOps) must not open its nodes to another policy's window and
	// budget in between.
	DeleteGrace time.Duration
	// MaxPolicies: the RebootPolicies compiled (DefaultMaxPolicies when 0); newer ones are refused.
	MaxPolicies int
	Log         klog.Logger
	Now         func() time.Time
	Index       *admission.Index // the node controller's: the status counts its entries
	Nodes       Nodes
	Blockers    *Blockers
}

// Runtime is the RebootPolicy runtime.
type Runtime struct {
	cfg   Config
	pools atomic.Pointer[policy.PoolSet] // nil: no RebootPolicies (or none known yet)
	// compiled: every pool's compiled policy by its pin (pinOf), for nodes pinned to it.
	compiled sync.Map
	infMu    sync.Mutex // guards inf
	inf      cache.SharedIndexInformer
	// compileMu makes compile one at a time; it guards tombstones (deleted policies whose nodes are
	// held for DeleteGrace).
	compileMu  sync.Mutex
	tombstones map[string]tombstone
	updates    string // updateFingerprint of the last compile (compileMu)
	// queue: compileKey (compile every RebootPolicy again), statusKey (queue every pool's status
	// write), or a policy's name (write its status).
	queue workqueue.TypedRateLimitingInterface[string]
	// counts: the index's entries grouped for the status, kept for one index generation.
	countsMu sync.Mutex
	counts   *counts
}

// compileKey asks for a compile, statusKey for every pool's status write: a RebootPolicy's name is
// never empty and has no '/'.
const (
	compileKey = ""
	statusKey  = "/status"
)

// statusEvery batches the status writes of the RebootPolicies: counts change with every step of
// every node, a person reads them by the second at best.
const statusEvery = time.Second

// New builds a Runtime; Start starts it.
func New(cfg Config) *Runtime {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Runtime{cfg: cfg, tombstones: map[string]tombstone{}}
}

// Start starts the RebootPolicy informer when the resource is there and waits for it, so the first
// admission sees every pool. When it is not, it logs why once and looks again every minute
// (installing the CRD later needs no restart). The runtime's worker runs until ctx ends.
func (r *Runtime) Start(ctx context.Context) error {
	if r.cfg.Dynamic == nil {
		return nil
	}
	// Made here, not in New: a standby (or an operator without the dynamic client) runs no queue.
	// Nothing adds to it before the first compile, which runs after this.
	r.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "rebootpolicies"})
	go func() { <-ctx.Done(); r.queue.ShutDown() }()
	go func() {
		for r.processNext(ctx) {
		}
	}()
	ok, why := r.probe(ctx)
	if !ok {
		r.cfg.Log.Info("no RebootPolicies", "why", why)
		go r.lookForPolicies(ctx)
		return nil
	}
	return r.runInformer(ctx)
}

func (r *Runtime) processNext(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	switch key {
	case compileKey:
		r.compile()
		r.queue.Forget(key)
		return true
	case statusKey:
		for _, p := range r.pools.Load().Pools() {
			r.queue.Add(p.Name)
		}
		r.queue.Forget(key)
		return true
	}
	if err := r.writeStatus(ctx, key); err != nil && ctx.Err() == nil {
		r.cfg.Log.Error(err, "RebootPolicy status not written; will retry", "policy", key)
		r.queue.AddRateLimited(key)
		return true
	}
	r.queue.Forget(key)
	return true
}

// probe lists RebootPolicies once: ok when the resource is there; otherwise why not, in words a
// person can act on. Never an error that stops the operator: without the resource it runs the flags'
// policy for every node.
func (r *Runtime) probe(ctx context.Context) (bool, string) {
	// Only "not there" (404) and "not allowed" (403) mean no pools. Anything else (a timeout, the API
	// server restarting) is asked again for up to probeFor: policies that exist must not be missed
	// because of one failed request at the start.
	var err error
	deadline := time.Now().Add(probeFor)
	for delay := 200 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		_, err = r.cfg.Dynamic.Resource(v1alpha1.Resource).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		r.cfg.Log.Info("listing RebootPolicies failed; trying again", "error", err.Error(), "in", delay.String())
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
	switch {
	case err == nil:
		return true, ""
	case apierrors.IsNotFound(err):
		return false, "the RebootPolicy CRD (rebootpolicies.update.slipway.dev) is not installed: every node runs the flags' policy; install it (kubectl apply -k deploy/) to use pools"
	case apierrors.IsForbidden(err):
		return false, "the operator may not list rebootpolicies.update.slipway.dev: every node runs the flags' policy; grant list/watch on rebootpolicies and update on rebootpolicies/status (deploy/base/operator-rbac.yaml)"
	default:
		return false, "listing rebootpolicies.update.slipway.dev: " + err.Error()
	}
}

// probeFor bounds how long the start waits for an answer about RebootPolicies.
const probeFor = time.Minute

// lookForPolicies probes every minute until the resource is there, then starts the informer.
func (r *Runtime) lookForPolicies(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ok, _ := r.probe(ctx); ok {
			r.cfg.Log.Info("RebootPolicies found: pools on")
			if err := r.runInformer(ctx); err != nil {
				r.cfg.Log.Error(err, "RebootPolicy informer")
			}
			return
		}
	}
}

func (r *Runtime) runInformer(ctx context.Context) error {
	f := dynamicinformer.NewDynamicSharedInformerFactory(r.cfg.Dynamic, 0)
	inf := f.ForResource(v1alpha1.Resource).Informer()
	// A status write (ours) changes no generation: only a spec change or a policy added or deleted
	// does. A burst of changes is one compile (the initial list of fifty policies is one, not fifty).
	changed := func() { r.queue.Add(compileKey) }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { changed() },
		UpdateFunc: func(old, obj interface{}) {
			o, ok1 := old.(*unstructured.Unstructured)
			n, ok2 := obj.(*unstructured.Unstructured)
			if ok1 && ok2 && o.GetGeneration() == n.GetGeneration() {
				return
			}
			changed()
		},
		DeleteFunc: func(interface{}) { changed() },
	}); err != nil {
		return err
	}
	r.infMu.Lock()
	r.inf = inf
	r.infMu.Unlock()
	f.Start(ctx.Done())
	go func() { <-ctx.Done(); f.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("RebootPolicy informer never synced: check the operator's RBAC (list/watch rebootpolicies.update.slipway.dev)")
	}
	r.compile()
	return nil
}

func (r *Runtime) informer() cache.SharedIndexInformer {
	r.infMu.Lock()
	defer r.infMu.Unlock()
	return r.inf
}

// compile compiles every RebootPolicy into the pools (over the flags' Spec), indexes every node
// again under them and then hands them to admission: in between, a node indexed under a policy
// admission does not know yet is held, never decided under the one it leaves. One at a time.
func (r *Runtime) compile() {
	r.compileMu.Lock()
	defer r.compileMu.Unlock()
	inf := r.informer()
	if inf == nil {
		return
	}
	now := r.cfg.Now()
	var ps []*policy.Pool
	seen := map[string]bool{}
	var rps []*v1alpha1.RebootPolicy
	for _, obj := range inf.GetStore().List() {
		rp, err := toRebootPolicy(obj)
		if err != nil {
			r.cfg.Log.Error(err, "a RebootPolicy that does not decode is ignored")
			continue
		}
		rps = append(rps, rp)
	}
	// The oldest first: a new policy past the maximum is the one refused, never an old one that runs.
	slices.SortFunc(rps, func(a, b *v1alpha1.RebootPolicy) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	limit := cmp.Or(r.cfg.MaxPolicies, DefaultMaxPolicies)
	for i, rp := range rps {
		p := policy.CompilePool(r.cfg.Flags.Spec, rp)
		if i >= limit {
			p.Refuse(fmt.Sprintf("%s: more than %d RebootPolicies: this one, the %d. by age, is not compiled; delete or merge policies", TooMany, limit, i+1))
		}
		if p.Err == "" {
			if bs, err := r.cfg.Blockers.Pool(p); err != nil {
				p.Refuse(err.Error())
			} else if len(bs) > 0 {
				with := *p.Admission
				with.Blockers = bs
				p.Admission = &with
			}
		}
		seen[p.Name] = true
		ps = append(ps, p)
	}
	// Deleted policies hold their nodes for DeleteGrace: still selecting them, admitting none.
	for name, t := range r.tombstones {
		if seen[name] || !now.Before(t.until) {
			delete(r.tombstones, name)
		}
	}
	if old := r.pools.Load(); old != nil {
		for _, p := range old.Pools() {
			if seen[p.Name] || r.tombstones[p.Name].pool != nil || p.Deleted {
				continue
			}
			r.tombstones[p.Name] = tombstone{pool: p, until: now.Add(cmp.Or(r.cfg.DeleteGrace, DefaultDeleteGrace))}
		}
	}
	for name, t := range r.tombstones {
		// Look again when it ends (the queue keeps the earliest of several: each pass asks anew).
		r.queue.AddAfter(compileKey, t.until.Sub(now)+10*time.Millisecond)
		gone := *t.pool
		gone.Deleted = true
		gone.Admission = &admission.Rules{Name: name, Generation: gone.Generation, UID: gone.UID,
			Invalid: "deleted; its waiting nodes go to the next matching policy at " + t.until.UTC().Format(time.RFC3339)}
		ps = append(ps, &gone)
	}
	set := policy.NewPoolSet(ps)
	for _, p := range set.Pools() {
		if p.Policy != nil && !p.Deleted {
			// Nodes in their cycle drain under the policy they were admitted under, edited since or not.
			r.compiled.Store(pinOf(p.Name, p.Generation, p.UID), p.Policy)
		}
	}
	r.pools.Store(set)
	byName := map[string]*admission.Rules{}
	for _, p := range set.Pools() {
		byName[p.Name] = p.Admission
	}
	inUse := r.cfg.Nodes.Reindex()
	r.cfg.Nodes.SetRules(byName, set.Limits())
	// What no node is pinned to and no policy is now is not needed again.
	r.compiled.Range(func(k, _ interface{}) bool {
		pin := k.(string)
		name, _, _ := strings.Cut(pin, "/")
		if p := set.Get(name); !inUse[pin] && (p == nil || pinOf(p.Name, p.Generation, p.UID) != pin) {
			r.compiled.Delete(pin)
		}
		return true
	})
	r.cfg.Nodes.Waiting()
	if u := updateFingerprint(set); u != r.updates {
		// A pool's update settings, or which nodes a pool with some selects, may have changed: every
		// node gets its pool-group and pool-server looked at (nodes that wait only are not enough).
		r.updates = u
		r.cfg.Nodes.All()
	}
	r.queue.Add(statusKey)
}

// updateFingerprint sums up what decides each node's update settings: every pool's name, generation
// (a selector or priority edit changes it) and settings, when any pool declares some ("" when none
// does: then only the flags' apply, which every node got at its first sync).
func updateFingerprint(set *policy.PoolSet) string {
	var b strings.Builder
	any := false
	for _, p := range set.Pools() {
		fmt.Fprintf(&b, "%s/%d/%v;", p.Name, p.Generation, p.Deleted)
		if p.Policy != nil && !p.Policy.Update.Empty() {
			any = true
			fmt.Fprintf(&b, "%s %s;", p.Policy.Update.Group, p.Policy.Update.Server)
		}
	}
	if !any {
		return ""
	}
	return b.String()
}

// tombstone is a deleted RebootPolicy whose nodes are held until until.
type tombstone struct {
	pool  *policy.Pool
	until time.Time
}

// pinOf is the value of protocol.AdmittedPolicy for policy name at generation, object uid: a policy
// deleted and created again under its name starts at generation 1 again, and its uid tells them apart.
func pinOf(name string, generation int64, uid string) string {
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return fmt.Sprintf("%s/%d/%s", name, generation, uid)
}

// Pin is the value of protocol.AdmittedPolicy for a node admitted under rules (pinOf), "" for the
// flags' policy.
func Pin(rules *admission.Rules) string {
	if rules == nil || rules.Name == "" {
		return ""
	}
	return pinOf(rules.Name, rules.Generation, rules.UID)
}

func toRebootPolicy(obj interface{}) (*v1alpha1.RebootPolicy, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected %T", obj)
	}
	rp := &v1alpha1.RebootPolicy{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rp); err != nil {
		return nil, fmt.Errorf("RebootPolicy %s: %w", u.GetName(), err)
	}
	return rp, nil
}

// Pools are the pools in force (nil: none).
func (r *Runtime) Pools() *policy.PoolSet { return r.pools.Load() }

// Of is the pool n is in and the pools it ties between (policy.PoolSet.Of).
func (r *Runtime) Of(n *corev1.Node, inCycle bool) (name, tied string) {
	return r.pools.Load().Of(n, inCycle)
}

// For is the compiled policy node n runs under: while in its cycle the one pinned at its admission
// (ByPin), else its pool's, else the flags'. A node whose pool is tied or invalid is not admitted;
// what it waits, finishes or settles under is the flags'.
func (r *Runtime) For(n *corev1.Node, inCycle bool) *policy.Policy {
	set := r.pools.Load()
	if set == nil {
		return r.cfg.Flags
	}
	if inCycle {
		if pin, ok := n.Annotations[protocol.AdmittedPolicy]; ok {
			return r.ByPin(pin)
		}
	}
	name, tied := set.Of(n, inCycle)
	if p := set.Get(name); p != nil && p.Policy != nil && tied == "" {
		return p.Policy
	}
	return r.cfg.Flags
}

// Update is the update channel and server node n's agent writes into update.conf: its pool's as the
// pool is now (not its cycle's pin: the channel is no part of a cycle), the flags' when no pool selects
// it. ok is false when its pool did not compile or two pools select it: its keys are then left as they
// are, never replaced by the flags'.
func (r *Runtime) Update(n *corev1.Node) (set updateconf.Settings, ok bool) {
	pools := r.pools.Load()
	if pools == nil {
		return r.cfg.Flags.Update, true
	}
	name, tied := pools.Of(n, false)
	if tied != "" {
		return set, false
	}
	if name == "" {
		return r.cfg.Flags.Update, true
	}
	p := pools.Get(name)
	if p == nil || p.Policy == nil {
		return set, false
	}
	return p.Policy.Update, true
}

// ByPin is the compiled policy a pin names ("" the flags'): that generation when this operator
// compiled it, else (admitted by an operator process since restarted) the policy as it is now, else
// (deleted) the flags'.
func (r *Runtime) ByPin(pin string) *policy.Policy {
	if pin == "" {
		return r.cfg.Flags
	}
	if p, ok := r.compiled.Load(pin); ok {
		return p.(*policy.Policy)
	}
	name, _, _ := strings.Cut(pin, "/")
	if p := r.pools.Load().Get(name); p != nil && p.Policy != nil && !p.Deleted {
		return p.Policy
	}
	return r.cfg.Flags
}

// Canaries reports whether any policy in force (the flags' or a RebootPolicy's) sends canaries.
func (r *Runtime) Canaries() bool {
	if r.cfg.Flags.Canary.Nodes > 0 {
		return true
	}
	for _, p := range r.pools.Load().Pools() {
		if p.Policy != nil && p.Policy.Canary.Nodes > 0 {
			return true
		}
	}
	return false
}
