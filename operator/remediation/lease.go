package remediation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// DefaultLeaseNamespace is where medik8s keeps its node leases (NodeHealthCheck, Self Node
// Remediation, Node Maintenance Operator share them).
const DefaultLeaseNamespace = "medik8s-leases"

// ManagedBy labels the Leases Slipway creates, so a person sees whose they are.
const ManagedBy = "slipway"

// Lease is medik8s' node lease: NodeHealthCheck does not remediate a node whose Lease node-<name> in
// its lease namespace is held, and still valid (renewTime + leaseDurationSeconds after now), by
// another holder. Slipway holds it for the stage it is in, and takes over a lease that lapsed.
type Lease struct {
	Client    kubernetes.Interface
	Namespace string
	Now       func() time.Time

	// leases caches the namespace's Leases for Refuses (every waiting node's admission asks it): set
	// by Start; until then Refuses reads the API.
	leases coordinationlisters.LeaseLister
}

// Start watches the lease namespace (a few leases: one per node under remediation or in its cycle) so
// that Refuses, asked for every waiting node at every decision, reads a cache, not the API server. It
// returns once the cache is filled (at most 30 s); the watch runs until ctx ends.
func (l *Lease) Start(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(l.Client, 0, informers.WithNamespace(l.Namespace))
	lister := f.Coordination().V1().Leases().Lister()
	f.Start(ctx.Done())
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(wait.Done(), f.Coordination().V1().Leases().Informer().HasSynced) {
		return fmt.Errorf("leases of namespace %s never listed: check the operator's RBAC there (list, watch leases: deploy/remediation-fence)", l.Namespace)
	}
	l.leases = lister
	return nil
}

func (l *Lease) Kind() string { return "nhc-lease" }

func leaseName(node string) string { return "node-" + node }

// ErrHeldByOther: another holder keeps the node's lease valid (NodeHealthCheck remediating it, or
// maintenance): Slipway does not start the node's cycle.
var ErrHeldByOther = errors.New("the node's medik8s lease is held by another holder")

func (l *Lease) Hold(ctx context.Context, n *corev1.Node, since time.Time, valid time.Duration) (Mark, bool, error) {
	m := Mark{Node: n.Name, Namespace: l.Namespace, Name: leaseName(n.Name)}
	leases := l.Client.CoordinationV1().Leases(l.Namespace)
	renew := metav1.NewMicroTime(since)
	seconds := int32(valid / time.Second)
	cur, err := leases.Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: l.Namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": ManagedBy}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(Holder), LeaseDurationSeconds: &seconds,
				AcquireTime: ptr.To(metav1.NewMicroTime(l.Now())), RenewTime: &renew},
		}, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return m, false, fmt.Errorf("namespace %s does not exist (is medik8s NodeHealthCheck installed? it creates it; or unset --remediation-lease-namespace)", l.Namespace)
		}
		return m, err == nil, err
	}
	if err != nil {
		return m, false, err
	}
	holder := ptr.Deref(cur.Spec.HolderIdentity, "")
	if holder != Holder && holder != "" && leaseValid(cur, l.Now()) {
		return m, false, fmt.Errorf("%w %q until %s", ErrHeldByOther, holder, leaseEnd(cur).UTC().Format(time.RFC3339))
	}
	next := cur.DeepCopy()
	if holder != Holder {
		next.Spec.HolderIdentity = ptr.To(Holder)
		next.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(l.Now()))
		next.Spec.LeaseTransitions = ptr.To(ptr.Deref(cur.Spec.LeaseTransitions, 0) + 1)
	}
	next.Spec.RenewTime, next.Spec.LeaseDurationSeconds = &renew, &seconds
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	next.Labels["app.kubernetes.io/managed-by"] = ManagedBy
	_, err = leases.Update(ctx, next, metav1.UpdateOptions{}) // resourceVersion: a concurrent holder wins
	return m, err == nil, err
}

// Refuses: another holder keeps the node's lease valid. An error reading it refuses too (fail closed).
func (l *Lease) Refuses(ctx context.Context, n *corev1.Node) (bool, string) {
	var cur *coordinationv1.Lease
	var err error
	if l.leases != nil {
		cur, err = l.leases.Leases(l.Namespace).Get(leaseName(n.Name))
	} else {
		cur, err = l.Client.CoordinationV1().Leases(l.Namespace).Get(ctx, leaseName(n.Name), metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return false, ""
	}
	if err != nil {
		return true, fmt.Sprintf("cannot read medik8s lease %s/%s: %v", l.Namespace, leaseName(n.Name), err)
	}
	if holder := ptr.Deref(cur.Spec.HolderIdentity, ""); holder != Holder && holder != "" && leaseValid(cur, l.Now()) {
		return true, fmt.Sprintf("medik8s lease %s/%s held by %q until %s (a remediation of this node is under way)",
			l.Namespace, cur.Name, holder, leaseEnd(cur).UTC().Format(time.RFC3339))
	}
	return false, ""
}

func leaseEnd(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
}

func leaseValid(l *coordinationv1.Lease, now time.Time) bool { return leaseEnd(l).After(now) }

func (l *Lease) Release(ctx context.Context, m Mark) error {
	leases := l.Client.CoordinationV1().Leases(m.Namespace)
	cur, err := leases.Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ptr.Deref(cur.Spec.HolderIdentity, "") != Holder {
		return nil // another holder's now
	}
	err = leases.Delete(ctx, m.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (l *Lease) Held(ctx context.Context) ([]Mark, error) {
	list, err := l.Client.CoordinationV1().Leases(l.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=" + ManagedBy})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Mark
	for _, x := range list.Items {
		node, ok := strings.CutPrefix(x.Name, "node-")
		if ok && ptr.Deref(x.Spec.HolderIdentity, "") == Holder {
			out = append(out, Mark{Node: node, Namespace: x.Namespace, Name: x.Name})
		}
	}
	return out, nil
}
