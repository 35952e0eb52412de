// Package remediation tells the remediation controllers a cluster runs that a node in its reboot cycle
// reboots on purpose, so they do not replace the machine in the middle of its update (Flatcar #939:
// Cluster API's MachineHealthCheck can see a rebooting node NotReady and delete its Machine).
//
// Each Fence is one controller's own "leave this node alone" sign: medik8s NodeHealthCheck skips a
// node whose Lease node-<name> in medik8s-leases another holder keeps valid (Lease); Cluster API's
// MachineHealthCheck skips a Machine annotated cluster.x-k8s.io/skip-remediation (Machine). The
// Keeper holds every fence from a node's cordon until it is verified back, renews a lease when the
// node enters another stage (so it lapses when a stage outlasts --reboot-timeout, as the stall
// does), lets go when the cycle ends or the node stalls (then the node is broken, and remediating it
// is what those controllers are for), and never leaves one behind: what it set carries Slipway's
// holder or marker, and Sweep removes what no node in a cycle needs after a crash or a leader
// change. What another holder set is never touched.
package remediation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/operator/admission"
)

// Holder is the identity Slipway's marks carry (the Lease's holderIdentity, the Machine's marker).
const Holder = "slipway-update-operator"

// Mark is one thing a fence set for a node, enough to remove it again without the Node.
type Mark struct {
	Node            string
	Namespace, Name string // of the object that carries it (the Lease, the Machine)
}

// Fence is one remediation controller's sign.
type Fence interface {
	// Kind names the fence in logs, Events and metrics (nhc-lease, capi-machine).
	Kind() string
	// Hold sets the sign for n, valid from since for valid (a Lease's term; signs without one ignore
	// it). ok false: the fence does not apply to this node (a Node no Machine backs); nothing set.
	Hold(ctx context.Context, n *corev1.Node, since time.Time, valid time.Duration) (m Mark, ok bool, err error)
	// Release removes the sign m names if it is still Slipway's.
	Release(ctx context.Context, m Mark) error
	// Held lists the signs Slipway holds now, for Sweep.
	Held(ctx context.Context) ([]Mark, error)
}

// Grace is added to --reboot-timeout for a lease's term: the stall is reported before the lease lapses.
const Grace = 2 * time.Minute

// Keeper holds the fences of the nodes in their cycle. A nil *Keeper does nothing.
type Keeper struct {
	fences  []Fence
	timeout time.Duration // --reboot-timeout: a stage's term
	rec     record.EventRecorder
	log     klog.Logger
	now     func() time.Time

	mu   sync.Mutex
	held map[string]map[string]held // node -> fence kind -> what it holds

	errors *prometheus.CounterVec
	gauge  *prometheus.GaugeVec
}

type held struct {
	mark  Mark
	since time.Time
	// none: the fence does not apply to the node at this stage (no Machine backs it, or its Machine
	// backs another node): nothing to remove, and nothing to ask again until the next stage.
	none bool
}

// NewKeeper keeps fences for nodes whose stages each have timeout (--reboot-timeout, > 0). reg may be nil.
func NewKeeper(fences []Fence, timeout time.Duration, rec record.EventRecorder, log klog.Logger, now func() time.Time, reg prometheus.Registerer) (*Keeper, error) {
	if len(fences) == 0 {
		return nil, nil
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("the remediation fence needs --reboot-timeout: a fence without a term would keep a broken node from remediation for ever")
	}
	k := &Keeper{fences: fences, timeout: timeout, rec: rec, log: log.WithName("remediation"), now: now, held: map[string]map[string]held{},
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slipway_operator_remediation_fence_errors_total",
			Help: "Failed attempts to set, renew or remove a remediation fence (a NodeHealthCheck Lease, a Machine's skip-remediation), by fence.",
		}, []string{"fence"}),
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "slipway_operator_remediation_fences",
			Help: "Nodes whose remediation fence this operator holds now, by fence.",
		}, []string{"fence"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{k.errors, k.gauge} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range fences {
		k.gauge.WithLabelValues(f.Kind())
		k.errors.WithLabelValues(f.Kind())
	}
	return k, nil
}

// refuser is a fence that can say a node must not start its cycle now (another controller holds it).
type refuser interface {
	Refuses(ctx context.Context, n *corev1.Node) (bool, string)
}

// BlockerName is the blocked-by kind of a node a remediation controller holds.
const BlockerName = "remediation"

// Blocker holds the admission of a node that a remediation controller is working on (its lease held
// by another holder): blocked-by "remediation: ...", asked again like any blocker. Nil for a nil Keeper.
func (k *Keeper) Blocker() admission.Blocker {
	if k == nil {
		return nil
	}
	return admission.Func{N: BlockerName, F: func(ctx context.Context, n *corev1.Node) (bool, string) {
		for _, f := range k.fences {
			if r, ok := f.(refuser); ok {
				if no, why := r.Refuses(ctx, n); no {
					return true, why
				}
			}
		}
		return false, ""
	}}
}

// Admit sets every fence of a node about to be admitted, before it is cordoned. A fence that cannot
// be set is reported (log, Warning Event, metric) and does not hold the node: one node's Machine
// annotations, a lease namespace gone or an unreachable management cluster must not stop every reboot
// of the pool. A node a remediation controller holds is kept out by Blocker, before admission.
func (k *Keeper) Admit(ctx context.Context, n *corev1.Node) {
	if k == nil {
		return
	}
	k.hold(ctx, n, k.now())
}

// Sync keeps n's fences as its state says: held while it is in its cycle and not stalled (renewed
// when a new stage began at since), removed otherwise. Errors are reported (log, Event, metric), not
// returned: a rebooting node goes on whatever a fence does. retry > 0: a fence could not be set or
// removed; sync the node again then (a stalled node sends no news of its own).
func (k *Keeper) Sync(ctx context.Context, n *corev1.Node, fenced bool, since time.Time) (retry time.Duration) {
	if k == nil {
		return 0
	}
	if fenced {
		if since.IsZero() {
			since = k.now()
		}
		if !k.hold(ctx, n, since) {
			return RetryAfter
		}
		return 0
	}
	if !k.forget(ctx, n.Name, n) {
		return RetryAfter
	}
	return 0
}

// RetryAfter is how soon a fence that could not be set or removed is tried again.
const RetryAfter = 30 * time.Second

// hold sets n's fences; false when one failed (reported).
func (k *Keeper) hold(ctx context.Context, n *corev1.Node, since time.Time) bool {
	k.mu.Lock()
	have := maps.Clone(k.held[n.Name])
	k.mu.Unlock()
	good := true
	for _, f := range k.fences {
		if h, ok := have[f.Kind()]; ok && h.since.Equal(since) {
			continue // this stage's term is held already
		}
		m, ok, err := f.Hold(ctx, n, since, k.timeout+Grace)
		if err != nil {
			k.report(n, f.Kind(), "set", err)
			if errors.Is(err, ErrNotBacking) { // a Machine that does not back the node stays so: no retry
				k.remember(n.Name, f.Kind(), held{since: since, none: true})
			} else {
				good = false
			}
			continue
		}
		if k.remember(n.Name, f.Kind(), held{mark: m, since: since, none: !ok}) {
			k.log.V(1).Info("remediation fence set", "node", n.Name, "fence", f.Kind(), "object", m.Namespace+"/"+m.Name)
		}
	}
	return good
}

// remember records what fence kind holds for node; it reports whether a sign is held now that was
// not before (the gauge counts signs, not the nodes a fence does not apply to).
func (k *Keeper) remember(node, kind string, h held) (added bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held[node] == nil {
		k.held[node] = map[string]held{}
	}
	old, had := k.held[node][kind]
	k.held[node][kind] = h
	switch {
	case !h.none && (!had || old.none):
		k.gauge.WithLabelValues(kind).Inc()
		return true
	case h.none && had && !old.none:
		k.gauge.WithLabelValues(kind).Dec()
	}
	return false
}

// Forget removes every fence Slipway holds for node (its cycle ended, it stalled, or it was deleted).
func (k *Keeper) Forget(ctx context.Context, node string) {
	if k == nil {
		return
	}
	k.forget(ctx, node, nil)
}

// forget is Forget; n (nil: deleted) gets the Warning Event of a failure. false: one failed.
func (k *Keeper) forget(ctx context.Context, node string, n *corev1.Node) bool {
	k.mu.Lock()
	have := maps.Clone(k.held[node])
	k.mu.Unlock()
	good := true
	for _, f := range k.fences {
		h, ok := have[f.Kind()]
		if !ok {
			continue
		}
		if !h.none {
			if err := f.Release(ctx, h.mark); err != nil {
				k.report(n, f.Kind(), "remove", fmt.Errorf("node %s: %w", node, err))
				good = false
				continue // kept: the node's next sync (at the latest RetryAfter) tries again
			}
		}
		k.mu.Lock()
		delete(k.held[node], f.Kind())
		if len(k.held[node]) == 0 {
			delete(k.held, node)
		}
		k.mu.Unlock()
		if !h.none {
			k.gauge.WithLabelValues(f.Kind()).Dec()
			k.log.V(1).Info("remediation fence removed", "node", node, "fence", f.Kind())
		}
	}
	return good
}

// starter is a fence with a cache to fill before the first decision; it is kept until ctx ends.
type starter interface {
	Start(ctx context.Context) error
}

// Start fills the fences' caches (the lease namespace's Leases). A cache that cannot be filled leaves
// its fence reading the API server, said once in the log.
func (k *Keeper) Start(ctx context.Context) {
	if k == nil {
		return
	}
	for _, f := range k.fences {
		if s, ok := f.(starter); ok {
			if err := s.Start(ctx); err != nil {
				k.report(nil, f.Kind(), "watch", err)
			}
		}
	}
}

// Sweep, before the first sync, takes over what a previous operator left: the signs of nodes still in
// their cycle are remembered (their syncs renew them), every other one is removed. fenced says whether
// a node (by name) is in its cycle and not stalled; false for a node that no longer exists.
func (k *Keeper) Sweep(ctx context.Context, fenced func(node string) bool) {
	if k == nil {
		return
	}
	for _, f := range k.fences {
		marks, err := f.Held(ctx)
		if err != nil {
			k.report(nil, f.Kind(), "list", err)
			continue
		}
		for _, m := range marks {
			if fenced(m.Node) {
				k.remember(m.Node, f.Kind(), held{mark: m}) // zero since: the node's next sync renews it
				continue
			}
			if err := f.Release(ctx, m); err != nil {
				k.report(nil, f.Kind(), "remove", fmt.Errorf("node %s (left by an earlier operator): %w", m.Node, err))
				continue
			}
			k.log.Info("removed a remediation fence an earlier operator left", "node", m.Node, "fence", f.Kind(), "object", m.Namespace+"/"+m.Name)
		}
	}
}

// Holds reports whether the fence kind is held for node (for tests and the status view).
func (k *Keeper) Holds(node, kind string) bool {
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.held[node][kind]
	return ok
}

func (k *Keeper) report(n *corev1.Node, kind, what string, err error) {
	k.errors.WithLabelValues(kind).Inc()
	k.log.Info("remediation fence: "+what+" failed", "fence", kind, "error", err.Error())
	if n != nil && k.rec != nil {
		k.rec.Eventf(n, corev1.EventTypeWarning, "RemediationFenceFailed", "could not %s the %s remediation fence: %v", what, kind, err)
	}
}
