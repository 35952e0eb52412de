package operator

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/blocker"
	"github.com/slipway-dev/slipway/operator/fleetstore"
	"github.com/slipway-dev/slipway/operator/health"
	"github.com/slipway-dev/slipway/operator/policy"
)

// policiesKey: write the RebootPolicies' status (policyStatus), at most about once a second;
// policySpecsKey: compile them again (policiesChanged), once for a burst of changes (the informer's
// initial list of fifty policies is one recompile, not fifty).
const (
	policiesKey    = "/policies"
	policySpecsKey = "/policy-specs"
)

// policyStatusEvery batches the status writes of the RebootPolicies: counts change with every step
// of every node, a person reads them by the second at best.
const policyStatusEvery = time.Second

// probePolicies lists RebootPolicies once: ok when the resource is there; otherwise why not, in words
// a person can act on. Never an error that stops the operator: without the resource it runs the flags'
// policy for every node.
func (c *Controller) probePolicies(ctx context.Context) (bool, string) {
	// Only "not there" (404) and "not allowed" (403) mean no pools. Anything else (a timeout, the API
	// server restarting) is asked again for up to policyProbeFor: policies that exist must not be
	// missed because of one failed request at the start.
	var err error
	deadline := time.Now().Add(policyProbeFor)
	for delay := 200 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		_, err = c.cfg.Dynamic.Resource(v1alpha1.Resource).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		c.log.Info("listing RebootPolicies failed; trying again", "error", err.Error(), "in", delay.String())
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

// policyProbeFor bounds how long the start waits for an answer about RebootPolicies.
const policyProbeFor = time.Minute

// startPolicies starts the RebootPolicy informer when the resource is there and waits for it, so the
// first admission sees every pool. When it is not, it logs why once and looks again every minute.
func (c *Controller) startPolicies(ctx context.Context) error {
	if c.cfg.Dynamic == nil {
		return nil
	}
	ok, why := c.probePolicies(ctx)
	if !ok {
		c.log.Info("no RebootPolicies", "why", why)
		go c.lookForPolicies(ctx) // installing the CRD later needs no restart
		return nil
	}
	return c.runPolicyInformer(ctx)
}

// lookForPolicies probes every minute until the resource is there, then starts the informer.
func (c *Controller) lookForPolicies(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ok, _ := c.probePolicies(ctx); ok {
			c.log.Info("RebootPolicies found: pools on")
			if err := c.runPolicyInformer(ctx); err != nil {
				c.log.Error(err, "RebootPolicy informer")
			}
			return
		}
	}
}

func (c *Controller) runPolicyInformer(ctx context.Context) error {
	f := dynamicinformer.NewDynamicSharedInformerFactory(c.cfg.Dynamic, 0)
	inf := f.ForResource(v1alpha1.Resource).Informer()
	// A status write (ours) changes no generation: only a spec change or a policy added or deleted does.
	changed := func() { c.queue.Add(policySpecsKey) }
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
	c.rpMu.Lock()
	c.rpInf = inf
	c.rpMu.Unlock()
	f.Start(ctx.Done())
	go func() { <-ctx.Done(); f.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("RebootPolicy informer never synced: check the operator's RBAC (list/watch rebootpolicies.update.slipway.dev)")
	}
	c.policiesChanged()
	return nil
}

// DefaultPolicyDeleteGrace is Config.PolicyDeleteGrace's default.
const DefaultPolicyDeleteGrace = 30 * time.Second

// policiesChanged compiles every RebootPolicy into the pools (over the flags' Spec), indexes every node
// again under them and then hands them to admission: in between, a node indexed under a policy
// admission does not know yet is held, never decided under the one it leaves. One at a time.
func (c *Controller) policiesChanged() {
	c.policiesMu.Lock()
	defer c.policiesMu.Unlock()
	c.rpMu.Lock()
	inf := c.rpInf
	c.rpMu.Unlock()
	if inf == nil {
		return
	}
	base := c.cfg.Spec
	if !c.cfg.Compiled() {
		base = policy.Defaults() // a Config put together by hand (tests): the defaults under the pools
	}
	now := c.cfg.Now()
	var ps []*policy.Pool
	seen := map[string]bool{}
	for _, obj := range inf.GetStore().List() {
		rp, err := toRebootPolicy(obj)
		if err != nil {
			c.log.Error(err, "a RebootPolicy that does not decode is ignored")
			continue
		}
		p := policy.CompilePool(base, rp)
		if p.Err == "" {
			if bs, err := c.poolBlockers(p); err != nil {
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
	// Deleted policies hold their nodes for PolicyDeleteGrace: still selecting them, admitting none.
	for name, t := range c.tombstones {
		if seen[name] || !now.Before(t.until) {
			delete(c.tombstones, name)
		}
	}
	if old := c.pools.Load(); old != nil {
		for _, p := range old.Pools() {
			if seen[p.Name] || c.tombstones[p.Name].pool != nil || p.Deleted {
				continue
			}
			grace := cmp.Or(c.cfg.PolicyDeleteGrace, DefaultPolicyDeleteGrace)
			c.tombstones[p.Name] = tombstone{pool: p, until: now.Add(grace)}
		}
	}
	for name, t := range c.tombstones {
		// Look again when it ends (the queue keeps the earliest of several: each pass asks anew).
		c.queue.AddAfter(policySpecsKey, t.until.Sub(now)+10*time.Millisecond)
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
			c.compiled.Store(pinOf(p.Name, p.Generation, p.UID), p.Policy)
		}
	}
	c.pools.Store(set)
	byName := map[string]*admission.Rules{}
	for _, p := range set.Pools() {
		byName[p.Name] = p.Admission
	}
	inUse := map[string]bool{}
	for _, n := range c.allNodes() {
		c.reindex(n.Name)
		inUse[n.Annotations[protocol.AdmittedPolicy]] = true
	}
	c.admitter.SetPolicies(byName, set.Limits())
	// What no node is pinned to and no policy is now is not needed again.
	c.compiled.Range(func(k, _ interface{}) bool {
		pin := k.(string)
		name, _, _ := strings.Cut(pin, "/")
		if p := set.Get(name); !inUse[pin] && (p == nil || pinOf(p.Name, p.Generation, p.UID) != pin) {
			c.compiled.Delete(pin)
		}
		return true
	})
	c.queue.Add(waitingKey)
	c.queue.Add(policiesKey)
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

// poolBlockers are pool p's own blockers: its health checks (over the dynamic client) and its blocking
// pod selectors (over the pod informer, started when a pool first needs it; until it has synced they
// hold the pool's nodes).
func (c *Controller) poolBlockers(p *policy.Pool) ([]admission.Blocker, error) {
	var bs []admission.Blocker
	if len(p.HealthChecks) > 0 {
		if c.cfg.Dynamic == nil {
			return nil, fmt.Errorf("healthChecks: the operator has no dynamic client")
		}
		bs = append(bs, &health.Blocker{Checks: p.HealthChecks, Client: c.cfg.Dynamic, Mapper: c.restMapper(), Log: c.log})
	}
	if p.Policy != nil && len(p.Policy.Steer.Pre) > 0 {
		bs = append(bs, c.steeringConflict())
	}
	if len(p.PodSelectors) > 0 {
		b, err := blocker.NewPodsOnNode(c.podInformer(), p.PodSelectors)
		if err != nil {
			return nil, fmt.Errorf("blockingPodSelectors: %w", err)
		}
		bs = append(bs, b)
	}
	return bs, nil
}

// steeringConflict holds a node whose pre-reboot labels would change a label Slipway did not set
// (steer.Config.Conflict) rather than clobber it, under the labels of the policy it waits under (its
// RebootPolicy's steering, or the flags').
func (c *Controller) steeringConflict() admission.Blocker {
	return admission.Func{N: string(admission.KindSteeringLabel), F: func(_ context.Context, n *corev1.Node) (bool, string) {
		why := c.nodePolicy(n, false).Steer.Conflict(n)
		return why != "", why
	}}
}

// restMapper maps the health checks' resources to their kinds, once per controller.
func (c *Controller) restMapper() meta.ResettableRESTMapper {
	c.mapperOnce.Do(func() {
		c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.cfg.Client.Discovery()))
	})
	return c.mapper
}

// podInformer is the pod blockers' informer: the flags' (Config.PodInformer), else one of its own,
// started on first use and watched for changes like the flags'.
func (c *Controller) podInformer() blocker.PodSource {
	if c.cfg.PodInformer != nil {
		return c.cfg.PodInformer
	}
	c.podsOnce.Do(func() {
		c.pods = blocker.NewPodInformer(c.cfg.Client)
		_, _ = c.pods.AddEventHandler(onAnyChange(c.enqueueWaiting))
		go c.pods.Run(c.runCtx.Done())
	})
	return c.pods
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

// assignPolicy sets the entry's policy (policy.PoolSet.Of).
func (c *Controller) assignPolicy(n *corev1.Node, e *admission.Node) {
	e.Policy, e.PolicyTied = c.pools.Load().Of(n, e.State.InCycle())
}

// nodePolicy is the compiled policy node n runs under: while in its cycle the one pinned at its
// admission (policyByPin), else its pool's, else the flags'. A node whose pool is tied or invalid is
// not admitted; what it waits, finishes or settles under is the flags'.
func (c *Controller) nodePolicy(n *corev1.Node, inCycle bool) *policy.Policy {
	set := c.pools.Load()
	if set == nil {
		return &c.cfg.Policy
	}
	if inCycle {
		if pin, ok := n.Annotations[protocol.AdmittedPolicy]; ok {
			return c.policyByPin(pin)
		}
	}
	name, tied := set.Of(n, inCycle)
	if p := set.Get(name); p != nil && p.Policy != nil && tied == "" {
		return p.Policy
	}
	return &c.cfg.Policy
}

// PolicyOf is the RebootPolicy n is in ("" the flags'): the one its cycle is pinned to (inCycle: the
// caller has classified it), else the one it matches now (FleetView; a tie or no match is the flags').
// The admission index has it for every node it holds (reindexed on every policy change): the metrics
// ask for every node on every scrape, and matching 5,000 nodes against 50 selectors each time kept an
// idle operator at 8% of a core.
func (c *Controller) PolicyOf(n *corev1.Node, inCycle bool) string {
	set := c.pools.Load()
	if set == nil {
		return ""
	}
	if p, ok := c.index.Policy(n.Name); ok {
		return p
	}
	name, tied := set.Of(n, inCycle)
	if tied != "" {
		return ""
	}
	return name
}

// policyByPin is the compiled policy a pin names ("" the flags'): that generation when this operator
// compiled it, else (admitted by an operator process since restarted) the policy as it is now, else
// (deleted) the flags'.
func (c *Controller) policyByPin(pin string) *policy.Policy {
	if pin == "" {
		return &c.cfg.Policy
	}
	if p, ok := c.compiled.Load(pin); ok {
		return p.(*policy.Policy)
	}
	name, _, _ := strings.Cut(pin, "/")
	if p := c.pools.Load().Get(name); p != nil && p.Policy != nil && !p.Deleted {
		return p.Policy
	}
	return &c.cfg.Policy
}

// policyPin is the value of protocol.AdmittedPolicy for a node admitted under p (pinOf), "" for the
// default policy.
func policyPin(p *admission.Rules) string {
	if p == nil || p.Name == "" {
		return ""
	}
	return pinOf(p.Name, p.Generation, p.UID)
}

// syncPolicies writes each RebootPolicy's status when it changed: its nodes, the window, canaries and
// conditions. A policy deleted meanwhile is skipped; a conflict is retried by the queue.
func (c *Controller) syncPolicies(ctx context.Context) error {
	set := c.pools.Load()
	if set == nil || c.cfg.Dynamic == nil {
		return nil
	}
	c.rpMu.Lock()
	inf := c.rpInf
	c.rpMu.Unlock()
	if inf == nil {
		return nil
	}
	now := c.cfg.Now()
	entries := c.index.EntriesByName()
	tied := map[string][]string{}             // policy -> nodes that tie between it and another
	byPolicy := map[string][]admission.Node{} // policy -> its nodes' entries
	all := make([]admission.Node, 0, len(entries))
	for node, e := range entries {
		all = append(all, e)
		byPolicy[e.Policy] = append(byPolicy[e.Policy], e)
		for _, name := range strings.Split(e.PolicyTied, ", ") {
			if name != "" {
				tied[name] = append(tied[name], node)
			}
		}
	}
	fleetStats := admission.VersionsOf(all) // canary places and proof are the fleet's
	sw := c.store.View()
	// A window opens or an exclusion ends without any node changing: look again then (at most every 5
	// minutes), so window and nextOpen do not go stale on an idle fleet.
	again := 5 * time.Minute
	for _, p := range set.Pools() {
		if s := p.Admission.Schedule; s != nil && !s.Open(now) {
			if next := s.NextOpen(now); !next.IsZero() && next.Sub(now) < again {
				again = max(next.Sub(now)+time.Second, time.Second)
			}
		}
	}
	c.queue.AddAfter(policiesKey, again)
	var firstErr error
	for _, p := range set.Pools() {
		obj, ok, err := inf.GetStore().GetByKey(p.Name)
		if err != nil || !ok {
			continue
		}
		rp, err := toRebootPolicy(obj)
		if err != nil {
			continue
		}
		st := policyStatus(p, rp.Status, byPolicy[p.Name], fleetStats, tied[p.Name], sw, now)
		if equality.Semantic.DeepEqual(st, rp.Status) {
			continue
		}
		rp.Status = st
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rp)
		if err != nil {
			return err
		}
		_, err = c.cfg.Dynamic.Resource(v1alpha1.Resource).UpdateStatus(ctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsNotFound(err) && firstErr == nil {
			firstErr = fmt.Errorf("writing the status of RebootPolicy %s: %w", p.Name, err)
		}
	}
	return firstErr
}

// policyStatus is pool p's status: counts from the index entries of its nodes, the window now, where
// each OS version's canaries stand, and the conditions (their transition times kept from old).
func policyStatus(p *policy.Pool, old v1alpha1.RebootPolicyStatus, mine []admission.Node, fleetStats map[string]*admission.VersionStats, tied []string, sw fleetstore.View, now time.Time) v1alpha1.RebootPolicyStatus {
	st := v1alpha1.RebootPolicyStatus{ObservedGeneration: p.Generation, Conditions: append([]metav1.Condition(nil), old.Conditions...)}
	newest := ""
	for _, e := range mine {
		for _, v := range []string{e.Version, e.AskedVersion} {
			if protocol.CompareVersions(protocol.NormalVersion(v), newest) > 0 {
				newest = protocol.NormalVersion(v)
			}
		}
	}
	for _, e := range mine {
		st.Nodes++
		switch {
		case e.State.InCycle():
			st.InCycle++
		case e.Waiting():
			st.Waiting++
		}
		if e.Settling != "" {
			st.Settling++
		}
		if e.Counts {
			st.Unavailable++
		}
		if newest != "" && protocol.NormalVersion(e.Version) == newest && !e.State.InCycle() && !e.Waiting() {
			st.UpToDate++
		}
	}
	cond := func(typ string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: p.Generation, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))})
	}
	if p.Err != "" {
		cond("Accepted", false, "Invalid", p.Err+"; its waiting nodes are held (blocked-by policy)")
	} else {
		cond("Accepted", true, "Compiled", "the spec compiled; nodes matching it follow it from their next admission")
	}
	a := p.Admission
	var next time.Time
	if st.Window, next = p.Window(now); !next.IsZero() {
		t := metav1.NewTime(next)
		st.NextOpen = &t
	}
	if a.Paused != "" {
		cond("Paused", true, "SpecPaused", a.Paused)
	} else {
		cond("Paused", false, "NotPaused", "")
	}
	if len(tied) > 0 {
		sort.Strings(tied)
		cond("Overlapping", true, "SamePriority", fmt.Sprintf("%d node(s) also match another RebootPolicy of priority %d and are held: %s", len(tied), p.Priority, nodes.Names(tied, 5)))
	} else {
		cond("Overlapping", false, "NoOverlap", "")
	}
	if st.InCycle > 0 {
		cond("Progressing", true, "NodesInCycle", fmt.Sprintf("%d node(s) in their reboot cycle", st.InCycle))
	} else {
		cond("Progressing", false, "Idle", "")
	}
	halted := []string{}
	// The versions the pool's nodes ask for; where their canaries stand is the fleet's (canary proof and
	// places are counted over every node, as admission counts them).
	stats := admission.VersionsOf(mine)
	var versions []string
	for v := range stats {
		versions = append(versions, v)
	}
	sort.Strings(versions)
	for _, v := range versions {
		s := stats[v]
		if s.Asking == 0 && s.InFlight == 0 {
			continue
		}
		vs := v1alpha1.VersionStatus{Version: v, Asking: int32(s.Asking)}
		if fs := fleetStats[v]; a.Canary.On() && fs != nil {
			full := admission.WithMemory(*fs, v, sw)
			cs := admission.CanaryOf(full, a.Canary, sw.VersionResumedAt(v), now, 0)
			if cs.State != "off" {
				vs.Canary = cs.State
			}
			if cs.State == "halted" {
				halted = append(halted, v)
			}
		}
		st.Versions = append(st.Versions, vs)
	}
	if len(halted) > 0 {
		cond("Halted", true, "VersionHalted", "halted: "+strings.Join(halted, ", ")+" (kubectl slipway resume --version V)")
	} else {
		cond("Halted", false, "NoHalt", "")
	}
	// Transition times only move when a condition's status does (meta.SetStatusCondition); a status
	// otherwise equal to the old one is not written.
	return st
}
