// Package operator is Slipway's update-operator: it watches Nodes, keeps the budget of nodes allowed
// to be unavailable, runs the before/after-reboot hooks, cordons and drains, grants reboot-ok,
// verifies the reboot by the boot ID and uncordons what it cordoned. What happens to a node next is
// decided by protocol.Table, who may start by package admission, and what carrying out a step does
// by the effects table (effects.go); this package observes Nodes and carries the decisions out.
//
// Files: controller.go wires the informers, the work queue and the workers; sync.go is one node's
// step (observe → stall → admit → decide → act) over the view it gathers once (view.go); effects.go
// the table of what each action writes, records, notifies and counts; admit.go, stalls.go, drain.go,
// settle.go, volumes.go (with gates.go, their informers) and fleetstate.go the steps' details. Two
// concerns have packages of their own, which reach back only through interfaces and callbacks they
// own: the RebootPolicy runtime and the blockers (package policies), and the fleet's ConfigMaps,
// switch, record and history (package fleetstore).
//
// # Locks
//
// In the order they may be taken: policies.Runtime's compile lock (one compile at a time; it indexes
// every node and hands the pools to admission) → admission.Admitter's (one decision at a time) →
// admission.Index's → the informer store's and nodes.Overlay's (read through Controller.node).
// fleetstore.Store's, policies.Blockers', policies.Runtime's other two and the drainer's are leaves:
// nothing else is taken while holding them. No lock is held across an API call
// (fleetstore.TestNoLockAcrossAPICalls for the store, the one that writes); only blockers run under
// the Admitter's lock, each bounded (admission.Bounded).
package operator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/history"
	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/fence"
	"github.com/slipway-dev/slipway/operator/fleetstore"
	"github.com/slipway-dev/slipway/operator/notify"
	"github.com/slipway-dev/slipway/operator/policies"
	"github.com/slipway-dev/slipway/operator/policy"
	"github.com/slipway-dev/slipway/operator/remediation"
	"github.com/slipway-dev/slipway/operator/stall"
)

// Defaults of the Config fields New fills in (the policy's are package policy's: Compile sets them).
const (
	DefaultWorkers    = 4
	DefaultStuckAfter = 2 * time.Minute
)

// Config wires a Controller.
type Config struct {
	// Policy is the reboot policy (package policy: compiled from the flags); its fields are Config's.
	policy.Policy

	Client kubernetes.Interface
	// Dynamic reads the RebootPolicies and writes their status (nil: no pools, the flags' policy for
	// every node).
	Dynamic  dynamic.Interface
	Recorder record.EventRecorder
	Metrics  *Metrics // may be nil
	Log      klog.Logger
	Now      func() time.Time

	// Fence, when set, is asked before every admission; it refuses unless this instance leads (see
	// package fence). Nil only when leader election is off.
	Fence func(context.Context) (fence.Term, error)
	// StuckAfter: /healthz and /readyz fail when one sync has run this long, or nodes have waited in
	// the queue this long without any sync finishing (DefaultStuckAfter).
	StuckAfter time.Duration
	// Workers is how many nodes are synced at once (DefaultWorkers). Admissions are decided one at a
	// time (admission.Admitter), where a node being admitted holds a reservation until its PATCH
	// returns; every other step of different nodes runs in parallel (the workqueue never hands one
	// node to two workers), so a hundred nodes' round trips to the API server overlap.
	Workers int

	// Blockers are checked before a node is admitted, ahead of the ones the policy's settings make
	// (package policies builds those): for blockers only code can make.
	Blockers []admission.Blocker
	// PolicyDeleteGrace: how long the nodes of a deleted RebootPolicy stay held before they move to the
	// next matching policy (policies.DefaultDeleteGrace when 0).
	PolicyDeleteGrace time.Duration
	// MaxPolicies: the RebootPolicies compiled (policies.DefaultMaxPolicies when 0).
	MaxPolicies int
	// BlockerTimeout bounds one blocker's check (admission.DefaultCheckTimeout when 0).
	BlockerTimeout time.Duration
	// BlockerRetry: how soon a node held by a blocker is asked about again although nothing it watches
	// changed (admission.DefaultBlockerRetry when 0).
	BlockerRetry time.Duration
	// Namespace holds the fleet switch (ConfigMap slipway-fleet); "" turns the switch off.
	Namespace string
	// Notify sends --notify-url notifications; nil: none (its methods are nil-safe).
	Notify *notify.Sender
	// Identity is this instance's leader-election identity, published as the fleet status's leader.
	Identity string
	// FleetLazyEvery: how long news only the status view reads (cycle durations, proofs while no
	// policy runs canaries) may wait before it is written (DefaultFleetLazyEvery when 0).
	FleetLazyEvery time.Duration
	// HistoryEvery: how long a cycle that ended may wait before the history is written
	// (DefaultHistoryEvery when 0); the controller writes what waits when it stops.
	HistoryEvery time.Duration
	// Remediation holds the remediation fences of nodes in their cycle (nil: none).
	Remediation *remediation.Keeper
	// StartPaused: on a fresh install (no slipway-fleet ConfigMap in Namespace yet) the leader
	// creates it paused before its first admission (--start-paused).
	StartPaused bool
}

// Controller is the update-operator's reconcile loop (informer → workqueue → one sync per node).
type Controller struct {
	cfg      Config
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   corelisters.NodeLister
	// store: the fleet switch, the fleet record and the history (package fleetstore).
	store    *fleetstore.Store
	overlay  *nodes.Overlay
	index    *admission.Index // what admission reads of every node, kept per change
	admitter *admission.Admitter
	// policies: the RebootPolicy runtime; blockers builds the flags' and the pools' blockers.
	policies *policies.Runtime
	blockers *policies.Blockers
	queue    workqueue.TypedRateLimitingInterface[string]
	drains   *drainer
	log      klog.Logger
	// gates: the roll-out gates' informers (PodDisruptionBudgets, VolumeAttachments).
	gates *gates
	// settleUntil: node -> when only time ends its settling (reindex), for the timer sync sets.
	settleUntil sync.Map

	// cycleMarks: node -> cycleMark, noted at its grant for its history entry (history.go).
	cycleMarks sync.Map

	// malformed: node -> the malformed values last reported (one Event per change); per node, and
	// the workqueue never hands one node to two workers, so a sync.Map needs no lock of ours.
	malformed sync.Map

	running      atomic.Bool    // Run is processing the queue (this instance leads)
	synced       atomic.Bool    // the informer has synced
	syncStarted  []atomic.Int64 // per worker: unix nanos its sync in progress started, 0 when none
	lastProgress atomic.Int64   // unix nanos the last sync finished (or the controller started)
}

// Work queue keys besides node names (which cannot contain '/').
const (
	// fleetKey: write the fleet record, the history and the published Status (fleetstore.Store.Sync).
	fleetKey = "/fleet"
	// waitingKey: put every waiting node in the queue (waitingPass).
	waitingKey = "/waiting"
)

// New builds a Controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("no Kubernetes client")
	}
	if !cfg.Compiled() {
		// One path for the policy: what the flags, a RebootPolicy and a test all go through, so
		// nothing here fills in what Compile checks.
		return nil, fmt.Errorf("Config.Policy was not built by policy.Compile")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = DefaultStuckAfter
	}
	cfg.Recorder = newDedupRecorder(cfg.Recorder, 10*time.Minute, cfg.Now)
	if cfg.Metrics != nil {
		cfg.Metrics.now = cfg.Now // waits and proofs are dated by the controller's clock: the scrape reads them by it
	}
	c := &Controller{cfg: cfg, overlay: nodes.NewOverlay(), index: admission.NewIndex(), log: cfg.Log,
		syncStarted: make([]atomic.Int64, cfg.Workers)}
	// The queue's own limiter (client-go's default for controllers) paces retries of failed syncs;
	// a failed drain is retried on the drainer's backoff (--drain-retry-*), by AddAfter.
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodes"})
	// No resync: every decision is driven by a Node change, a timer the controller set itself, or a
	// drain finishing. An idle fleet costs no API calls.
	c.factory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTransform(nodes.Strip))
	c.informer = c.factory.Core().V1().Nodes().Informer()
	c.lister = c.factory.Core().V1().Nodes().Lister()
	c.drains = newDrainer(cfg.Client, cfg.Drain, cfg.Log, c.queue.Add)
	_, err := c.informer.AddEventHandler(c.nodeEvents())
	if err != nil {
		return nil, err
	}
	c.blockers = &policies.Blockers{Client: cfg.Client, Dynamic: cfg.Dynamic, Log: cfg.Log, Nodes: c.Nodes, OnChange: c.enqueueWaiting}
	c.policies = policies.New(policies.Config{Dynamic: cfg.Dynamic, Flags: &c.cfg.Policy, DeleteGrace: cfg.PolicyDeleteGrace, MaxPolicies: cfg.MaxPolicies,
		Log: cfg.Log, Now: cfg.Now, Index: c.index, Nodes: policyNodes{c}, Blockers: c.blockers})
	c.blockers.WaitsUnder = func(n *corev1.Node) *policy.Policy { return c.policies.For(n, false) }
	flags, err := c.blockers.Flags(&c.cfg.Policy)
	if err != nil {
		return nil, err
	}
	blockers := append(append([]admission.Blocker(nil), cfg.Blockers...), flags...)
	c.admitter = admission.NewAdmitter(admission.Config{
		Limits: admission.Limits{Fleet: cfg.MaxUnavailable, PerGroup: cfg.MaxUnavailablePerGroup, ControlPlane: cfg.MaxUnavailableControlPlane},
		Order:  cfg.ControlPlaneOrder,
		// The retry bound is the drain's: --undrainable-retry.
		Policy:       cfg.Admission(),
		Blockers:     blockers,
		CheckTimeout: cfg.BlockerTimeout,
		BlockerRetry: cfg.BlockerRetry,
	}, c.index)
	if c.store, err = fleetstore.New(fleetstore.Config{Client: cfg.Client, Namespace: cfg.Namespace, Log: cfg.Log, Now: cfg.Now,
		LazyEvery: cfg.FleetLazyEvery, HistoryEvery: cfg.HistoryEvery, Quiet: c.index.Quiet,
		MaxFailedReboots: cfg.MaxFailedReboots, MaxFailedPerVersion: cfg.Canary.MaxFailed,
		Status: statusOf(cfg), Policies: policy.Publish(policy.Named{Spec: cfg.Spec}), // the Spec the policy was compiled from
		OnSync:    func(d time.Duration) { c.queue.AddAfter(fleetKey, d) },
		OnMemory:  c.index.Bump,
		OnRelease: c.enqueueWaiting,
		OnSelfPause: func(reason string) {
			if cfg.Metrics != nil {
				cfg.Metrics.selfPauses.Inc()
			}
			cfg.Notify.Notify(notify.Event{Kind: notify.KindFleetPaused, Reason: reason, Time: c.cfg.Now()})
		},
	}); err != nil {
		return nil, err
	}
	if c.gates, err = newGates(cfg, c.queue.Add, c.index.SettlingNames); err != nil {
		return nil, err
	}
	if c.gates.volumes != nil {
		c.drains.attached = c.gates.attachedAny
	}
	if c.gates.pdbs != nil {
		c.drains.pdbs = c.gates.pdbsBefore
	}
	if cfg.Metrics != nil {
		cfg.Metrics.Observe(c)
	}
	return c, nil
}

// nodeEvents is the Node informer's handler: our overlay and the admission index follow every change,
// and the node is synced.
func (c *Controller) nodeEvents() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if n, ok := obj.(*corev1.Node); ok {
				c.overlay.Observed(n)
				c.reindex(n.Name)
				c.queue.Add(n.Name)
			}
		},
		UpdateFunc: func(oldObj, obj interface{}) {
			n, ok := obj.(*corev1.Node)
			if !ok {
				return
			}
			if was, ok := oldObj.(*corev1.Node); ok && was.UID != n.UID {
				// Deleted and created again under its name while the watch was away (a relist shows
				// it as an update): the old machine's cycle ends, and the new one starts clean.
				c.replaced(was)
				c.overlay.Deleted(was.Name)
				c.forgetNode(was.Name)
			}
			c.overlay.Observed(n)
			// When what admission reads of it changed (the budget, who waits), reindex gives the
			// waiting nodes another look.
			c.reindex(n.Name)
			c.queue.Add(n.Name)
		},
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				c.replaced(n)
				c.overlay.Deleted(n.Name)
				c.forgetNode(n.Name)
				c.reindex(n.Name)
			}
		},
	}
}

// Run processes nodes until ctx ends with Config.Workers workers. Admissions see each other through
// the index (decided one at a time, each reserved until its PATCH returned); every action is a single
// quick PATCH (drains run in the background).
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	c.running.Store(true)
	defer c.running.Store(false)
	if !cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced) {
		return fmt.Errorf("node informer never synced: check the operator's RBAC (list/watch nodes)")
	}
	if err := c.blockers.Start(ctx); err != nil {
		return err
	}
	defer c.gates.shutdown()
	if err := c.gates.start(ctx); err != nil {
		return err
	}
	defer c.store.Shutdown()
	if err := c.store.Start(ctx); err != nil {
		return err
	}
	if c.cfg.StartPaused {
		if err := c.store.StartPaused(ctx, StartPausedReason, "slipway-update-operator"); err != nil {
			return err
		}
	}
	if err := c.policies.Start(ctx); err != nil { // before the first admission: every pool known
		return err
	}
	// Before the first admission: the fleet's memory, stored and on the Nodes.
	var marks []fleetrecord.Failure
	for _, n := range c.Nodes() {
		marks = append(marks, nodeFailures(n, admission.Of(n, c.cfg.GroupLabel, c.cfg.StallPolicy))...)
	}
	c.store.Load(marks)
	// What an operator before this one left on remediation controllers' objects: kept for nodes in
	// their cycle, removed for the rest.
	c.cfg.Remediation.Start(ctx)
	c.cfg.Remediation.Sweep(ctx, c.fenced)
	c.synced.Store(true)
	c.lastProgress.Store(c.cfg.Now().UnixNano())
	c.queue.Add(fleetKey)
	schedule := "always open"
	if c.cfg.Schedule != nil {
		schedule = c.cfg.Schedule.String()
	}
	c.log.Info("operator controller started", "maxUnavailable", c.cfg.MaxUnavailable.String(),
		"schedule", schedule, "beforeHooks", c.cfg.Hooks.Before, "afterHooks", c.cfg.Hooks.After,
		"drainTimeout", c.cfg.Drain.Timeout.String(), "drainFailurePolicy", c.cfg.Drain.Policy)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	var workers sync.WaitGroup
	for i := 0; i < c.cfg.Workers; i++ {
		workers.Add(1)
		go func(slot int) {
			defer workers.Done()
			for c.processNext(ctx, slot) {
			}
		}(i)
	}
	workers.Wait()
	flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.store.Flush(flush) // the history and the proofs that wait
	return nil
}

func (c *Controller) processNext(ctx context.Context, slot int) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	c.syncStarted[slot].Store(c.cfg.Now().UnixNano())
	var retryAfter time.Duration
	var err error
	switch name {
	case fleetKey:
		err = c.store.Sync(ctx)
	case waitingKey:
		c.waitingPass()
	default:
		retryAfter, err = c.sync(ctx, name)
		if c.store.NewsWaits() && c.index.Quiet() {
			c.queue.Add(fleetKey) // the roll-out is over: its last durations and proofs wait for nothing
		}
	}
	c.syncStarted[slot].Store(0)
	c.lastProgress.Store(c.cfg.Now().UnixNano())
	switch {
	case err != nil && ctx.Err() == nil:
		if apierrors.IsConflict(err) {
			c.log.V(1).Info("node changed under us; looking again", "node", name)
		} else {
			c.log.Error(err, "sync failed; will retry", "node", name)
		}
		c.queue.AddRateLimited(name)
	case retryAfter > 0:
		c.queue.Forget(name) // a success: the failure backoff starts over (and waiting passes see it again)
		c.queue.AddAfter(name, retryAfter)
	default:
		c.queue.Forget(name)
	}
	return true
}

// lookAtWaiting puts every waiting node in the queue once, through waitingKey: many changes in a
// burst collapse into one pass, run by a worker after the nodes queued before it.
func (c *Controller) lookAtWaiting() { c.queue.Add(waitingKey) }

// waitingPass puts every waiting node in the queue.
func (c *Controller) waitingPass() {
	for _, n := range c.index.WaitingNames() {
		// A node whose last sync failed has its retry scheduled with backoff (AddRateLimited):
		// adding it now would retry at once, and an admission the API server keeps refusing
		// (a webhook or policy) would freeze the slot and PATCH again ~100 times a second, each
		// failure freeing the slot that starts the next waiting pass.
		if c.queue.NumRequeues(n) == 0 {
			c.queue.Add(n)
		}
	}
}

// forgetNode drops what the controller remembers of a deleted node, so that a node created again
// under its name starts afresh (its malformed values are reported again, its wait starts anew).
func (c *Controller) forgetNode(name string) {
	c.malformed.Delete(name)
	c.cycleMarks.Delete(name)
	c.settleUntil.Delete(name)
	c.gates.forget(name)
	c.drains.forget(name)
	c.index.EndWait(name)
	c.cfg.Notify.Unblocked(name)
}

// replaced ends the cycle of a Node deleted in it (cluster-autoscaler, a machine health check, cloud
// auto-repair, a person): its slot is free once it leaves the index, and the Event and the metric say
// so. Deleted after its grant (rebooting, or back and not finished), the machine never proved the
// version its grant pinned: that is a failure of the version (ReasonReplaced, dated at the deletion),
// which holds the version's canary place like a stall and counts toward --max-failed-per-version until
// a person resumes it -- or a release that bricks the boot walks through the fleet one replaced
// canary at a time, each remediated before --reboot-timeout. It does not count against
// --max-failed-reboots: the machine is gone, and a failed-reboot budget spent by an autoscaler's
// scale-down of drained nodes would pause every pool. Deleted before its grant, the machine never ran
// the version, and nothing is counted.
func (c *Controller) replaced(n *corev1.Node) {
	e := admission.Of(n, c.cfg.GroupLabel, c.cfg.StallPolicy)
	if !e.State.InCycle() {
		return
	}
	now := c.cfg.Now()
	version := n.Annotations[protocol.RebootVersion]
	failed := stall.PostGrant(e.State) && version != ""
	if failed {
		// The object a delete (or a UID change seen in a relist) hands over may predate this leader's
		// own finish: a machine whose cycle for the version is proven did not fail it.
		failed = !c.store.Proved(n.Name, string(n.UID), version)
	}
	c.log.Info("node deleted in its cycle: cycle ended as replaced", "node", n.Name, "uid", n.UID, "state", e.State, "failureOfVersion", failed, "version", version)
	c.ended(n, history.Replaced, "the Node was deleted in its cycle", now)
	msg := "the Node was deleted in its reboot cycle before its grant: the cycle ended as replaced (no failure counted, its budget slot freed)"
	if failed {
		msg = fmt.Sprintf("the Node was deleted in its reboot cycle after its grant for %s (%s): the cycle ended as replaced, a failure of %s that holds its canary place and counts toward --max-failed-per-version until kubectl slipway resume --version %s", version, e.State, version, version)
		if e.StalledVersion == version {
			// Its stall after the grant is that failure already: the record learns it (if it had not
			// yet) and the deletion adds no second one for the same machine and cycle.
			c.noteNodeFailures(n, e)
		} else {
			f := fleetrecord.Failure{Node: n.Name, UID: string(n.UID), Reason: fleetrecord.ReasonReplaced, Version: version, At: now,
				Why: "deleted after its grant for " + version + " (" + string(e.State) + "), before its cycle finished"}
			c.store.Learn(func(r *fleetrecord.Record) bool { return r.AddFailure(f) })
		}
		if c.cfg.Metrics != nil {
			c.cfg.Metrics.failed.WithLabelValues(fleetrecord.ReasonReplaced).Inc()
		}
	}
	c.cfg.Recorder.Event(n, corev1.EventTypeWarning, "CycleReplaced", msg)
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.cycles.WithLabelValues("replaced").Inc()
	}
}

// SetFence sets Config.Fence after New (the fence needs the identity leader election settles on).
// Call it before Run.
func (c *Controller) SetFence(f func(context.Context) (fence.Term, error)) { c.cfg.Fence = f }

// Ready is /readyz for the leader: an error when the controller should have made progress and has
// not (informer not synced, or Live fails). An instance that does not lead has nothing to do and is
// ready.
func (c *Controller) Ready() error {
	if !c.running.Load() {
		return nil
	}
	if !c.synced.Load() {
		return errors.New("leading, but the node informer has not synced")
	}
	return c.Live()
}

// Live is /healthz: an error when the leader's workers are wedged, one sync running for StuckAfter or
// nodes queued for StuckAfter with no sync finishing. Every API request has its own deadline
// (--kube-api-timeout), so only a wedged process gets here; the kubelet then restarts it and the lease
// passes on, instead of a leader that renews its lease and does nothing keeping it for ever. A
// standby, and a leader still syncing its informer (a large fleet's first list), are live.
func (c *Controller) Live() error {
	if !c.running.Load() || !c.synced.Load() {
		return nil
	}
	now := c.cfg.Now()
	for i := range c.syncStarted {
		if t := c.syncStarted[i].Load(); t != 0 && now.Sub(time.Unix(0, t)) > c.cfg.StuckAfter {
			return fmt.Errorf("one node sync has been running for %s", now.Sub(time.Unix(0, t)).Round(time.Second))
		}
	}
	if n := c.queue.Len(); n > 0 && now.Sub(time.Unix(0, c.lastProgress.Load())) > c.cfg.StuckAfter {
		return fmt.Errorf("%d nodes waiting in the workqueue and no sync finished for %s", n, now.Sub(time.Unix(0, c.lastProgress.Load())).Round(time.Second))
	}
	return nil
}

// node returns the newest view of a node: the informer's, or our own last write if newer.
func (c *Controller) node(name string) (*corev1.Node, error) {
	n, err := c.lister.Get(name)
	if err != nil {
		return nil, err
	}
	return c.overlay.View(n), nil
}

// Nodes are the Nodes as the controller sees them (also FleetView's).
func (c *Controller) Nodes() []*corev1.Node {
	list, err := c.lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	for i, n := range list {
		list[i] = c.overlay.View(n)
	}
	return list
}

// reindex brings name's index entry up to date with the newest view of the node (the informer's
// store or our own newer write) and, when it changed, gives waiting nodes another look.
func (c *Controller) reindex(name string) {
	now := c.cfg.Now()
	var seen *corev1.Node
	var entry admission.Node
	changed := c.index.Update(name, now, func() (admission.Node, bool) {
		n, err := c.node(name)
		if err != nil {
			return admission.Node{}, false
		}
		e := admission.Of(n, c.cfg.GroupLabel, c.cfg.StallPolicy)
		e.Policy, e.PolicyTied = c.policies.Of(n, e.State.InCycle())
		seen, entry = n, e
		var until time.Time
		if e.Settling, until = c.settling(n, e.State, now); until.After(now) {
			c.settleUntil.Store(name, until)
		} else {
			c.settleUntil.Delete(name)
		}
		if until.After(now) {
			// Pinned only while the settle has a time bound ahead (its --settle-time, or its PDBs'
			// --settle-timeout): a settle held past its timeout (--settle-timeout-policy=hold), or one a
			// later dip of old PDBs starts again, keeps its own pools but not a pin from long ago.
			e.SettleIn(n)
		}
		return e, true
	})
	if changed {
		c.lookAtWaiting()
		c.policies.NodesChanged()
	}
	if seen != nil {
		c.noteNodeFailures(seen, entry)
		if entry.State == protocol.NeedsReboot && entry.AskedVersion != "" {
			// The fleet's first sighting of a staged version: a policy's minimum age counts from it.
			c.store.See(protocol.NormalVersion(entry.AskedVersion), seen.Name, now)
		}
	}
}

// hold keeps name counting against every pool it is in until the returned func is called, however
// its entry changes meanwhile: for steps that free a slot and may spend the failure budget, so no
// admission takes the slot before a self-pause they cause is in place.
func (c *Controller) hold(name string) func() {
	release := c.index.Reserve(name)
	return func() {
		if release() {
			c.lookAtWaiting()
		}
	}
}

// apply sends p (conditional on the resourceVersion it carries) and records our own write: the overlay
// (so we never act on an older view) and the index. It returns the node as written, or n itself when
// the patch was empty and nothing was sent.
func (c *Controller) apply(ctx context.Context, p *nodes.Patch, n *corev1.Node) (*corev1.Node, error) {
	out, err := p.Apply(ctx, c.cfg.Client, n)
	if err != nil {
		return nil, err
	}
	if out == nil {
		return n, nil
	}
	c.overlay.Wrote(out)
	c.reindex(out.Name)
	return out, nil
}

// enqueueWaiting gives every waiting node another look after something admission reads outside the
// Nodes changed (the fleet switch, a blocker's objects, a freed slot).
func (c *Controller) enqueueWaiting() {
	c.index.Bump()
	c.lookAtWaiting()
}

// Switch is the pause switch as published (FleetView).
func (c *Controller) Switch() fleetswitch.Switch { return c.store.Switch() }

// Pools are the budgets as admission counts them now (FleetView).
func (c *Controller) Pools() []admission.BudgetPool { return c.admitter.Pools() }

// Remembered is what the fleet record holds now (FleetView): the halted versions and the number of
// nodes whose failures count against --max-failed-reboots.
func (c *Controller) Remembered() (halted []string, failed int) { return c.store.Remembered() }
