// Package operator is Slipway's update-operator: it watches Nodes, keeps the budget of nodes allowed
// to be unavailable, runs the before/after-reboot hooks, cordons and drains, grants reboot-ok,
// verifies the reboot by the boot ID and uncordons what it cordoned. What happens to a node next is
// decided by protocol.Table alone; this package only observes Nodes and carries out the table's actions.
package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/fleet"
	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/blocker"
	"github.com/slipway-dev/slipway/operator/budget"
	"github.com/slipway-dev/slipway/operator/fence"
	"github.com/slipway-dev/slipway/operator/notify"
	"github.com/slipway-dev/slipway/operator/window"
)

// Config wires a Controller.
type Config struct {
	Client         kubernetes.Interface
	Hooks          protocol.Hooks
	MaxUnavailable budget.Max
	Window         *window.Window // nil: always open
	Drain          DrainConfig
	Recorder       record.EventRecorder
	Metrics        *Metrics // may be nil
	Log            klog.Logger
	Now            func() time.Time

	// Fence, when set, is asked before every admission; it refuses unless this instance leads (see
	// package fence). Nil only when leader election is off.
	Fence func(context.Context) (fence.Term, error)
	// RebootTimeout is how long a node may stay in one stage of its cycle before it is reported
	// stalled (annotation, Warning Event, metric); 0 never.
	RebootTimeout time.Duration
	// StallPolicy says whether a stalled node keeps its budget slot.
	StallPolicy StallPolicy
	// StuckAfter: /readyz fails when one sync has run this long, or nodes have waited in the queue
	// this long without any sync finishing. Default 2 minutes.
	StuckAfter time.Duration
	// Workers is how many nodes are synced at once (default 4). Admissions are decided one at a time
	// (admitMu) against the fleet index, where a node being admitted holds a reservation until its
	// PATCH returns; every other step of different nodes runs in parallel (the workqueue never hands
	// one node to two workers), so a hundred nodes' round trips to the API server overlap.
	Workers int

	// Policies. GroupLabel names the node label whose values are budget groups (FleetLock's group for
	// nodes without it); MaxUnavailablePerGroup (nil: none) limits each group as MaxUnavailable limits
	// the fleet. Control-plane nodes have their own budget (default 1) and an order.
	GroupLabel                 string
	MaxUnavailablePerGroup     *budget.Max
	MaxUnavailableControlPlane budget.Max
	ControlPlaneOrder          ControlPlaneOrder
	// Schedule gates new cycles (windows and exclusions); nil falls back to Window.
	Schedule Schedule
	// Blockers are checked before a node is admitted. BlockerInformers feed them (e.g. the pod
	// informer); Run starts them, waits for them, and looks at waiting nodes again when they change.
	Blockers         []Blocker
	BlockerInformers []cache.SharedIndexInformer
	// MinReady, when set, adds the min-ready-nodes blocker over this controller's own view of the
	// Nodes (its writes included, so two admissions in a row see each other).
	MinReady *blocker.MinReadyNodes
	// Namespace holds the fleet switch (ConfigMap slipway-fleet); "" turns the switch off.
	Namespace string
	// Notify sends --notify-url notifications; nil: none (its methods are nil-safe).
	Notify *notify.Sender
	// Identity is this instance's leader-election identity, published as the fleet status's leader.
	Identity string
	// MaxFailedReboots pauses the fleet when that many nodes of the current roll-out stalled after
	// their grant or came back with a fleet-wide blocker firing; 0 never.
	MaxFailedReboots int
}

// Controller is the update-operator's reconcile loop (informer → workqueue → one sync per node).
type Controller struct {
	cfg       Config
	factory   informers.SharedInformerFactory
	informer  cache.SharedIndexInformer
	lister    corelisters.NodeLister
	fleetCMs  corelisters.ConfigMapLister // nil when Namespace is ""
	fleetInf  cache.SharedIndexInformer
	cmFactory informers.SharedInformerFactory
	overlay   *nodes.Overlay
	index     *fleetIndex    // what admission reads of every node, kept per change
	plan      *admissionPlan // the last admission plan (under admitMu)
	needGen   uint64         // changes whenever needSince does (under stateMu)
	admitMu   sync.Mutex     // one admission decided at a time
	stateMu   sync.Mutex     // malformed, needSince, needGen
	fleetMu   sync.Mutex     // fleet
	queue     workqueue.TypedRateLimitingInterface[string]
	drains    *drainer
	log       klog.Logger

	malformed map[string]string    // node -> the malformed values last reported (one Event per change)
	fleet     fleetState           // under fleetMu
	needSince map[string]time.Time // when each waiting node was first seen needing a reboot (metrics)

	running      atomic.Bool    // Run is processing the queue (this instance leads)
	synced       atomic.Bool    // the informer has synced
	syncStarted  []atomic.Int64 // per worker: unix nanos its sync in progress started, 0 when none
	lastProgress atomic.Int64   // unix nanos the last sync finished (or the controller started)
}

// New builds a Controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("no Kubernetes client")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	if cfg.Drain.Policy == "" {
		cfg.Drain.Policy = DrainRetry
	}
	if cfg.Drain.RetryBase <= 0 {
		cfg.Drain.RetryBase = 5 * time.Second
	}
	if cfg.Drain.RetryMax <= 0 {
		cfg.Drain.RetryMax = 5 * time.Minute
	}
	if cfg.StallPolicy == "" {
		cfg.StallPolicy = StallHold
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = 2 * time.Minute
	}
	if cfg.MaxUnavailableControlPlane == (budget.Max{}) {
		cfg.MaxUnavailableControlPlane, _ = budget.ParseMax("1")
	}
	if cfg.ControlPlaneOrder == "" {
		cfg.ControlPlaneOrder = OrderNone
	}
	cfg.Recorder = newDedupRecorder(cfg.Recorder, 10*time.Minute, cfg.Now)
	c := &Controller{cfg: cfg, overlay: nodes.NewOverlay(), index: newFleetIndex(), log: cfg.Log, malformed: map[string]string{}, needSince: map[string]time.Time{},
		syncStarted: make([]atomic.Int64, cfg.Workers)}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](cfg.Drain.RetryBase, cfg.Drain.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodes"})
	// No resync: every decision is driven by a Node change, a timer the controller set itself, or a
	// drain finishing. An idle fleet costs no API calls.
	c.factory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTransform(nodes.Strip))
	c.informer = c.factory.Core().V1().Nodes().Informer()
	c.lister = c.factory.Core().V1().Nodes().Lister()
	c.drains = newDrainer(cfg.Client, cfg.Drain, cfg.Log, c.queue.Add)
	_, err := c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if n, ok := obj.(*corev1.Node); ok {
				c.overlay.Observed(n)
				c.reindex(n.Name)
				c.queue.Add(n.Name)
			}
		},
		UpdateFunc: func(_, obj interface{}) {
			n, ok := obj.(*corev1.Node)
			if !ok {
				return
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
				c.overlay.Deleted(n.Name)
				c.drains.forget(n.Name)
				c.forgetNode(n.Name)
				c.reindex(n.Name)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	if cfg.MinReady != nil {
		mr, err := blocker.NewMinReady(*cfg.MinReady, func() ([]*corev1.Node, error) { return c.allNodes(), nil },
			func(n *corev1.Node) bool { return protocol.Observe(n, cfg.Hooks).Unavailable() })
		if err != nil {
			return nil, err
		}
		c.cfg.Blockers = append(c.cfg.Blockers, mr)
	}
	for _, inf := range cfg.BlockerInformers {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(interface{}) { c.enqueueWaiting() },
			UpdateFunc: func(interface{}, interface{}) { c.enqueueWaiting() },
			DeleteFunc: func(interface{}) { c.enqueueWaiting() },
		}); err != nil {
			return nil, err
		}
	}
	if cfg.Namespace != "" {
		// Only the one ConfigMap, by name: the switch costs a watch on one object.
		c.cmFactory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(cfg.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + fleet.ConfigMapName }))
		c.fleetInf = c.cmFactory.Core().V1().ConfigMaps().Informer()
		c.fleetCMs = c.cmFactory.Core().V1().ConfigMaps().Lister()
		changed := func() { c.queue.Add(fleetKey); c.enqueueWaiting() }
		if _, err := c.fleetInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(interface{}) { changed() },
			UpdateFunc: func(interface{}, interface{}) { changed() },
			DeleteFunc: func(interface{}) { changed() },
		}); err != nil {
			return nil, err
		}
	}
	if cfg.Metrics != nil {
		cfg.Metrics.watch(c)
	}
	return c, nil
}

// Run processes nodes until ctx ends with Config.Workers workers. Admissions see each other through
// the fleet index (decided one at a time, each reserved until its PATCH returned); every action is a
// single quick PATCH (drains run in the background).
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
	for _, inf := range c.cfg.BlockerInformers {
		go inf.Run(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("a blocker's informer never synced: check the operator's RBAC (list/watch pods)")
		}
	}
	if c.cmFactory != nil {
		c.cmFactory.Start(ctx.Done())
		defer c.cmFactory.Shutdown()
		if !cache.WaitForCacheSync(ctx.Done(), c.fleetInf.HasSynced) {
			return fmt.Errorf("fleet switch informer never synced: check the operator's RBAC (configmaps in %s)", c.cfg.Namespace)
		}
	}
	c.synced.Store(true)
	c.lastProgress.Store(c.cfg.Now().UnixNano())
	c.queue.Add(fleetKey)
	c.log.Info("operator controller started", "maxUnavailable", c.cfg.MaxUnavailable.String(),
		"window", c.cfg.Window.String(), "beforeHooks", c.cfg.Hooks.Before, "afterHooks", c.cfg.Hooks.After,
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
		err = c.syncFleet(ctx)
	case waitingKey:
		for _, n := range c.index.waitingNames() {
			c.queue.Add(n)
		}
	default:
		retryAfter, err = c.sync(ctx, name)
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
		c.queue.AddAfter(name, retryAfter)
	default:
		c.queue.Forget(name)
	}
	return true
}

// forgetNode drops what the controller remembers of a deleted node, so that a node created again
// under its name starts afresh (its malformed values are reported again, its wait starts anew).
func (c *Controller) forgetNode(name string) {
	c.stateMu.Lock()
	delete(c.malformed, name)
	c.stateMu.Unlock()
	c.endWait(name)
}

// endWait ends name's wait for admission (granted, aborted, gone) and returns when it began.
func (c *Controller) endWait(name string) (time.Time, bool) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	t, ok := c.needSince[name]
	if ok {
		delete(c.needSince, name)
		c.needGen++ // the admission plan reads needSince
	}
	return t, ok
}

// SetFence sets Config.Fence after New (the fence needs the identity leader election settles on).
// Call it before Run.
func (c *Controller) SetFence(f func(context.Context) (fence.Term, error)) { c.cfg.Fence = f }

// Ready is /readyz for the leader: an error when the controller should have made progress and has
// not (informer not synced, one sync running for StuckAfter, or nodes queued for StuckAfter with no
// sync finishing). An instance that does not lead has nothing to do and is ready.
func (c *Controller) Ready() error {
	if !c.running.Load() {
		return nil
	}
	if !c.synced.Load() {
		return errors.New("leading, but the node informer has not synced")
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

func (c *Controller) allNodes() []*corev1.Node {
	list, err := c.lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	for i, n := range list {
		list[i] = c.overlay.View(n)
	}
	return list
}

// counts is the one place that decides whether a node counts against the budget: it is in a cycle,
// NotReady or cordoned by anyone -- unless it stalled after its grant and --stall-policy=release.
func (c *Controller) counts(f protocol.Facts) bool {
	if c.cfg.StallPolicy == StallRelease && f.Stalled != "" && postGrant(protocol.Classify(f)) {
		return false
	}
	return f.Unavailable()
}

// waitingKey is the workqueue key that puts every waiting node in the queue once: many changes in a
// burst collapse into one pass (the queue holds a key once).
const waitingKey = "/waiting"

// enqueueWaiting gives every waiting node another look after something admission reads outside the
// Nodes changed (the fleet switch, a blocker's objects, a freed slot).
func (c *Controller) enqueueWaiting() {
	c.index.bump()
	c.queue.Add(waitingKey)
}

// fleetConfigMap is the fleet switch's ConfigMap, nil when there is none (or the switch is off).
func (c *Controller) fleetConfigMap() *corev1.ConfigMap {
	if c.fleetCMs == nil {
		return nil
	}
	cm, err := c.fleetCMs.ConfigMaps(c.cfg.Namespace).Get(fleet.ConfigMapName)
	if err != nil {
		return nil
	}
	return cm
}

// sync decides and carries out the next step of one node. It returns how long to wait before looking
// again when only time can change the answer.
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	n, err := c.node(name)
	if apierrors.IsNotFound(err) {
		c.drains.forget(name)
		c.cfg.Notify.Unblocked(name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	f := protocol.Observe(n, c.cfg.Hooks)
	log := c.log.WithValues("node", name)
	bad := strings.Join(f.Malformed, ", ")
	c.stateMu.Lock()
	changedBad := bad != c.malformed[name]
	if bad == "" {
		delete(c.malformed, name) // one entry per node with bad values, not per node
	} else {
		c.malformed[name] = bad
	}
	c.stateMu.Unlock()
	if changedBad {
		// Reported when the set changes, not on every sync.
		if bad != "" {
			log.Info("malformed values (read as false; reboot-paused as paused)", "values", f.Malformed)
			c.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "MalformedAnnotation", "malformed values read as false (reboot-paused: as paused): %s", bad)
		}
	}
	var retry time.Duration
	state := protocol.Classify(f)
	if n, err = c.markStall(ctx, n, state, &f, log); err != nil {
		return 0, err
	}
	if _, at := stallOf(state, f, n, c.cfg.Now(), c.cfg.RebootTimeout); f.Stalled == "" && !at.IsZero() {
		// Look again when it would stall, if nothing else happens first.
		retry = at.Sub(c.cfg.Now()) + time.Second
	}
	c.stateMu.Lock()
	if state == protocol.NeedsReboot {
		if _, ok := c.needSince[name]; !ok {
			c.needSince[name] = c.cfg.Now()
			c.needGen++
		}
	} else if _, ok := c.needSince[name]; ok && !state.InCycle() {
		delete(c.needSince, name) // no longer asking: a later ask waits from then
		c.needGen++
	}
	c.stateMu.Unlock()
	// The index holds this node as this sync sees it (an informer handler may still be on its way).
	c.reindex(name)
	if state == protocol.NeedsReboot && !f.Paused {
		c.admitMu.Lock()
		d := c.admission(ctx, name)
		if d.admitted {
			// Held against every pool until the admission PATCH below has returned (and our own
			// write is in the index) or failed: admissions decided meanwhile count it.
			c.index.reserve(name)
			defer c.unreserve(name)
		}
		c.admitMu.Unlock()
		f.Admitted, retry = d.admitted, d.retry
		if !d.admitted { // an admission's own PATCH removes blocked-by
			if n, err = c.markBlocked(ctx, n, d.why, log); err != nil {
				return 0, err
			}
			c.cfg.Notify.Blocked(name, d.why)
		} else {
			c.cfg.Notify.Unblocked(name)
		}
	} else {
		c.cfg.Notify.Unblocked(name)
		if _, ok := n.Annotations[protocol.BlockedBy]; ok && state != protocol.NeedsReboot {
			if n, err = c.markBlocked(ctx, n, "", log); err != nil {
				return 0, err
			}
		}
	}
	cycle := n.Annotations[protocol.DrainStarted]
	if state == protocol.Draining {
		if r, ok := c.drains.result(name, cycle); ok && (r.err == nil || c.cfg.Drain.Policy == DrainForce) {
			f.DrainDone = true
			if r.err != nil {
				log.Info("drain failed; granting reboot-ok anyway (--drain-failure-policy=force)", "error", r.err.Error())
				c.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "DrainFailedForced", "drain failed, granting reboot-ok anyway (--drain-failure-policy=force): %v", r.err)
			}
		}
	}
	state, row := protocol.Decide(f)
	switch row.Do {
	case protocol.None:
		return 0, nil
	case protocol.Wait:
		log.V(2).Info("waiting", "state", state, "because", row.When)
		return retry, nil
	case protocol.Drain:
		d, err := c.drain(ctx, n, cycle, log)
		return minRetry(d, retry), err
	}
	p := c.patchFor(row.Do, n, f)
	p.ResourceVersion = n.ResourceVersion
	actx := ctx
	if state == protocol.NeedsReboot && row.Next.InCycle() && c.cfg.Fence != nil {
		// An admission: only in this leadership term, and written before the lease could pass on.
		term, err := c.cfg.Fence(ctx)
		if err != nil {
			return 0, err
		}
		p.SetAnnotation(n, protocol.AdmittedBy, term.Name)
		var cancel context.CancelFunc
		actx, cancel = context.WithDeadline(ctx, term.Deadline)
		defer cancel()
	}
	if row.Do == protocol.Finish {
		// Finishing frees the slot, and a node back while a fleet-wide blocker fires spends the
		// failure budget (observeCycle): no admission may fall between the two.
		c.admitMu.Lock()
		defer c.admitMu.Unlock()
	}
	out, err := p.Apply(actx, c.cfg.Client, name)
	if err != nil {
		return 0, err
	}
	c.wrote(out)
	log.Info("cycle step", "from", state, "action", row.Do, "to", row.Next, "because", row.When)
	c.event(n, row, f)
	c.observeCycle(ctx, n, row, state)
	c.notifyCycle(n, row, state, f)
	if row.Do == protocol.Finish || row.Do == protocol.Abort || row.Do == protocol.GrantReboot {
		c.drains.forget(name)
	}
	if row.Next.InCycle() != state.InCycle() {
		c.enqueueWaiting()
	}
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.acted(row)
	}
	return 0, nil
}

// drain starts or follows a drain attempt of the node's current cycle. A failed attempt is reported
// once on the Node (drain-error annotation + Event) and retried after a per-node exponential backoff.
func (c *Controller) drain(ctx context.Context, n *corev1.Node, cycle string, log klog.Logger) (time.Duration, error) {
	if r, ok := c.drains.result(n.Name, cycle); ok && r.err != nil {
		if !r.reported {
			var p nodes.Patch
			msg := fmt.Sprintf("%s: attempt %d: %v", r.at.UTC().Format(time.RFC3339), r.failures, r.err)
			p.SetAnnotation(n, protocol.DrainError, truncate(msg, 1024))
			out, err := p.Apply(ctx, c.cfg.Client, n.Name)
			if err != nil {
				return 0, err
			}
			c.wrote(out)
			c.drains.markReported(n.Name)
			c.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "DrainFailed", "drain attempt %d failed, no reboot-ok; will retry: %v", r.failures, r.err)
			log.Info("drain failed; not granting reboot-ok, will retry", "attempt", r.failures, "error", r.err.Error())
			if c.cfg.Metrics != nil {
				c.cfg.Metrics.drainFailed()
			}
		}
		if wait := c.drains.retryAt(r).Sub(c.cfg.Now()); wait > 0 {
			return wait, nil
		}
	}
	if c.drains.start(ctx, n.Name, cycle) {
		log.Info("draining", "timeout", c.cfg.Drain.Timeout.String())
	}
	return 0, nil
}

// patchFor builds the single PATCH that carries out an action on n.
func (c *Controller) patchFor(a protocol.Action, n *corev1.Node, f protocol.Facts) *nodes.Patch {
	p := &nodes.Patch{}
	now := c.cfg.Now().UTC().Format(time.RFC3339)
	clearHooks := func(keys []string) {
		for _, k := range keys {
			p.DeleteAnnotation(n, k)
		}
	}
	endCycle := func() {
		if _, ok := n.Annotations[protocol.RebootOK]; ok {
			p.SetAnnotation(n, protocol.RebootOK, protocol.False)
		}
		p.DeleteLabel(n, protocol.BeforeReboot)
		p.DeleteLabel(n, protocol.AfterReboot)
		clearHooks(c.cfg.Hooks.Before)
		clearHooks(c.cfg.Hooks.After)
		if f.SlipwayCordoned || f.FLUOCordoned {
			// What Slipway cordoned, and what a replaced FLUO agent cordoned and can no longer uncordon.
			p.SetUnschedulable(n, false)
		}
		if f.FLUOCordoned {
			p.SetAnnotation(n, protocol.AgentMadeUnschedulable, protocol.False)
		}
		for _, k := range []string{protocol.Cordoned, protocol.DrainStarted, protocol.DrainError, protocol.RebootBootID, protocol.RebootOKTime, protocol.CycleStarted, protocol.Stalled, protocol.BlockedBy} {
			p.DeleteAnnotation(n, k)
		}
	}
	switch a {
	case protocol.MarkBeforeReboot:
		clearHooks(c.cfg.Hooks.Before)
		p.SetLabel(n, protocol.BeforeReboot, protocol.True)
		p.SetAnnotation(n, protocol.CycleStarted, now)
		p.DeleteAnnotation(n, protocol.BlockedBy)
	case protocol.StartDrain:
		if f.Needed && !f.BeforeLabel {
			p.SetAnnotation(n, protocol.CycleStarted, now) // admitted straight into the drain
		}
		p.DeleteAnnotation(n, protocol.BlockedBy)
		if !n.Spec.Unschedulable {
			p.SetUnschedulable(n, true)
			p.SetAnnotation(n, protocol.Cordoned, protocol.True)
		}
		p.SetAnnotation(n, protocol.DrainStarted, now)
		p.DeleteAnnotation(n, protocol.DrainError)
		p.DeleteLabel(n, protocol.BeforeReboot)
		clearHooks(c.cfg.Hooks.Before)
	case protocol.GrantReboot:
		p.SetAnnotation(n, protocol.RebootOK, protocol.True)
		if id := protocol.GrantBootID(n); id != "" {
			p.SetAnnotation(n, protocol.RebootBootID, id)
		}
		p.SetAnnotation(n, protocol.RebootOKTime, now)
		p.DeleteAnnotation(n, protocol.DrainStarted)
		p.DeleteAnnotation(n, protocol.DrainError)
	case protocol.MarkAfterReboot:
		clearHooks(c.cfg.Hooks.After)
		p.SetLabel(n, protocol.AfterReboot, protocol.True)
	case protocol.Finish:
		endCycle()
		p.SetAnnotation(n, protocol.LastRebootTime, now)
	case protocol.Abort:
		endCycle()
	}
	return p
}

// event records a Kubernetes Event on the Node for a cycle step.
func (c *Controller) event(n *corev1.Node, row protocol.Row, f protocol.Facts) {
	typ, reason, msg := corev1.EventTypeNormal, "", ""
	switch row.Do {
	case protocol.MarkBeforeReboot:
		reason, msg = "BeforeRebootHooks", fmt.Sprintf("reboot admitted; waiting for before-reboot annotations %v", c.cfg.Hooks.Before)
	case protocol.StartDrain:
		reason, msg = "Draining", "cordoned; evicting pods before reboot"
		if n.Spec.Unschedulable {
			msg = "already cordoned by someone else (will stay cordoned); evicting pods before reboot"
		}
	case protocol.GrantReboot:
		reason, msg = "RebootGranted", fmt.Sprintf("drained; reboot-ok granted at boot ID %q", protocol.GrantBootID(n))
	case protocol.MarkAfterReboot:
		reason, msg = "AfterRebootHooks", fmt.Sprintf("rebooted (boot ID changed); waiting for after-reboot annotations %v", c.cfg.Hooks.After)
	case protocol.Finish:
		reason, msg = "RebootCompleted", "reboot verified (boot ID changed, node Ready); cycle finished"
		if f.SlipwayCordoned || f.FLUOCordoned {
			msg += ", uncordoned"
		}
	case protocol.Abort:
		typ, reason, msg = corev1.EventTypeWarning, "CycleAborted", "cycle ended without a verified reboot: "+row.When
	default:
		return
	}
	c.cfg.Recorder.Event(n, typ, reason, msg)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func minRetry(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// markStall keeps the node's stalled annotation true to stallOf: set with a Warning Event when the
// node has been in its stage longer than RebootTimeout, removed when it moved on. It returns the node
// as written (its new resourceVersion is what the next PATCH must be conditional on).
func (c *Controller) markStall(ctx context.Context, n *corev1.Node, state protocol.State, f *protocol.Facts, log klog.Logger) (*corev1.Node, error) {
	reason, _ := stallOf(state, *f, n, c.cfg.Now(), c.cfg.RebootTimeout)
	if reason == f.Stalled {
		return n, nil
	}
	if reason != "" && postGrant(state) {
		// This may free the node's slot (--stall-policy=release) and spend the failure budget: no
		// admission may fall between the two, or one node starts after the fleet should have paused.
		c.admitMu.Lock()
		defer c.admitMu.Unlock()
	}
	p := nodes.Patch{ResourceVersion: n.ResourceVersion}
	if reason == "" {
		p.DeleteAnnotation(n, protocol.Stalled)
	} else {
		p.SetAnnotation(n, protocol.Stalled, reason)
	}
	out, err := p.Apply(ctx, c.cfg.Client, n.Name)
	if err != nil {
		return nil, err
	}
	c.wrote(out)
	if reason != "" {
		if postGrant(state) {
			c.failedReboot(n, "stalled: "+reason)
		}
		if c.cfg.Metrics != nil {
			c.cfg.Metrics.stallCounted(reason)
		}
		since := stageStart(state, n)
		c.cfg.Notify.Notify(notify.Event{Kind: notify.KindStalled, Node: n.Name, Reason: reason,
			Took: c.cfg.Now().Sub(since), Time: c.cfg.Now(),
			Detail: fmt.Sprintf("in stage %s (--reboot-timeout=%s): %s", state, c.cfg.RebootTimeout, stallHint(reason, n))})
		msg := fmt.Sprintf("%s for %s in stage %s (--reboot-timeout=%s): %s", reason, c.cfg.Now().Sub(since).Round(time.Second), state, c.cfg.RebootTimeout, stallHint(reason, n))
		log.Info("node stalled", "reason", reason, "state", state, "since", since)
		c.cfg.Recorder.Event(n, corev1.EventTypeWarning, "Stalled", msg)
		if c.cfg.StallPolicy == StallRelease && postGrant(state) {
			c.enqueueWaiting() // its slot is free now
		}
	} else {
		log.Info("node no longer stalled", "was", f.Stalled, "state", state)
	}
	f.Stalled = reason
	return out, nil
}

// stallHint tells a person what to look at.
func stallHint(reason string, n *corev1.Node) string {
	switch reason {
	case StallHooksPending:
		return "hook annotations not all \"true\" yet; check the hooks' DaemonSets"
	case StallDrainFailing:
		if e := n.Annotations[protocol.DrainError]; e != "" {
			return "drain keeps failing: " + e
		}
		return "drain has not finished; check PodDisruptionBudgets and pods that do not terminate"
	case StallRebootTimeout:
		return "reboot-ok granted but the kubelet still reports the boot it was granted in; check the node's console and its update-agent (reboot-error annotation)"
	case StallAgentSilent:
		return "the node is in a new boot but its update-agent has not reported in it; check the agent pod (image pull, crash loop)"
	case StallNotReady:
		return "rebooted but not Ready; check the kubelet"
	case StallPaused:
		return "reboot-paused holds the node in the middle of its cycle; remove it to go on"
	}
	return ""
}

// markBlocked keeps the node's blocked-by annotation equal to why ("" removes it), with an Event when
// it changes: Normal for waiting on budget, window or order (the plan working), Warning for a pause or
// a blocker (something a person may want to look at).
func (c *Controller) markBlocked(ctx context.Context, n *corev1.Node, why string, log klog.Logger) (*corev1.Node, error) {
	why = truncate(why, 512)
	old, had := n.Annotations[protocol.BlockedBy]
	if had && old == why || !had && why == "" {
		return n, nil
	}
	p := nodes.Patch{ResourceVersion: n.ResourceVersion}
	if why == "" {
		p.DeleteAnnotation(n, protocol.BlockedBy)
	} else {
		p.SetAnnotation(n, protocol.BlockedBy, why)
	}
	out, err := p.Apply(ctx, c.cfg.Client, n.Name)
	if err != nil {
		return nil, err
	}
	c.wrote(out)
	if why != "" {
		log.V(1).Info("not admitted", "why", why)
		typ, reason := corev1.EventTypeNormal, "Waiting"
		switch blockedKind(why) {
		case BlockedBudget, BlockedWindow, BlockedOrder:
		default:
			typ, reason = corev1.EventTypeWarning, "Blocked"
		}
		c.cfg.Recorder.Event(n, typ, reason, why)
	}
	return out, nil
}

// observeCycle feeds the cycle metrics and the failure budget after a step was written.
func (c *Controller) observeCycle(ctx context.Context, n *corev1.Node, row protocol.Row, state protocol.State) {
	now := c.cfg.Now()
	since := func(key string) (time.Duration, bool) {
		t, err := time.Parse(time.RFC3339, n.Annotations[key])
		return now.Sub(t), err == nil
	}
	m := c.cfg.Metrics
	switch row.Do {
	case protocol.GrantReboot:
		if m != nil {
			if d, ok := since(protocol.DrainStarted); ok {
				m.drainSeconds.Observe(d.Seconds())
			}
		}
		if t, ok := c.endWait(n.Name); ok && m != nil {
			m.needToGrant.Observe(now.Sub(t).Seconds())
		}
	case protocol.Finish:
		if m != nil {
			if d, ok := since(protocol.RebootOKTime); ok {
				m.grantToBack.Observe(d.Seconds())
			}
			m.cycles.WithLabelValues("finished").Inc()
		}
		// Back, but a fleet-wide blocker fires right after its reboot: it counts as failed.
		for _, b := range c.cfg.Blockers {
			if fw, ok := b.(FleetWide); ok && fw.FleetWide() {
				if blocked, reason := b.Check(ctx, n); blocked {
					c.failedReboot(n, "came back while "+b.Name()+" blocks: "+reason)
					break
				}
			}
		}
	case protocol.Abort:
		if m != nil {
			m.cycles.WithLabelValues("aborted").Inc()
		}
		c.endWait(n.Name)
	}
	_ = state
}

// notifyCycle tells --notify-url about a cycle step whose PATCH landed (n: the node before it).
func (c *Controller) notifyCycle(n *corev1.Node, row protocol.Row, state protocol.State, f protocol.Facts) {
	ev := notify.Event{Node: n.Name, Time: c.cfg.Now()}
	switch {
	case state == protocol.NeedsReboot && row.Next.InCycle():
		ev.Kind = notify.KindCycleStarted
	case row.Do == protocol.Finish:
		ev.Kind = notify.KindCycleFinished
		if t, err := time.Parse(time.RFC3339, n.Annotations[protocol.CycleStarted]); err == nil {
			ev.Took = c.cfg.Now().Sub(t)
		}
		if f.SlipwayCordoned || f.FLUOCordoned {
			ev.Detail = "uncordoned"
		}
	case row.Do == protocol.Abort:
		ev.Kind, ev.Reason = notify.KindCycleAborted, row.When
	default:
		return
	}
	c.cfg.Notify.Notify(ev)
}
