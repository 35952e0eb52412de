// Package fence ties each admission to the leadership term that made it. Leader election alone lets
// a leader that stalled (a long GC pause, a frozen VM) wake after its lease expired and land one more
// write, decided on what it believed before the stall, after a new leader already admitted other
// nodes: the budget would be exceeded by one. Before every admission the controller asks the Fence,
// which reads the Lease from the API server and refuses unless this instance holds it with time to
// spare; the admission PATCH must then finish before the lease could run out.
//
// One read serves every admission until the lease it showed could run out within Margin: no other
// candidate may take a lease before renewTime + leaseDuration (client-go's leader election waits that
// long on its own clock), so a read at t0 proves as much about t0+x as a new read would, up to that
// deadline. A rolling reboot of a hundred nodes then costs a Lease GET every few seconds, not one per node.
package fence

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Term is the leadership term an admission is made in.
type Term struct {
	// Name is "<identity>/<lease transitions>", written on the admitted Node (update.slipway.dev/admitted-by).
	Name string
	// Deadline is when the lease could be taken over at the earliest; the admission must be written
	// before it.
	Deadline time.Time
}

// Lease checks a leader-election Lease.
type Lease struct {
	Client    coordinationclient.LeasesGetter
	Namespace string
	Name      string
	Identity  string
	// Margin is the time the lease must still have left: at least one API request (the admission
	// PATCH) must fit in it.
	Margin time.Duration
	Now    func() time.Time

	mu      sync.Mutex
	last    Term      // the term the last read proved
	expires time.Time // when the lease that read showed could be taken over
}

// Check returns the current term if this instance holds the Lease with at least Margin to go, reading
// the Lease unless the last read still proves it. The time left is measured from renewTime by this
// process's clock, as the leader-election library itself does when it decides it still leads.
func (l *Lease) Check(ctx context.Context) (Term, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.expires.IsZero() && l.expires.Sub(l.now()) >= l.Margin {
		return l.last, nil
	}
	l.expires = time.Time{}
	lease, err := l.Client.Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return Term{}, fmt.Errorf("reading leader Lease %s/%s before admitting: %w", l.Namespace, l.Name, err)
	}
	term, err := l.check(lease)
	if err == nil {
		l.last, l.expires = term, term.Deadline.Add(l.Margin/2)
	}
	return term, err
}

func (l *Lease) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *Lease) check(lease *coordinationv1.Lease) (Term, error) {
	now := l.now
	s := lease.Spec
	holder := ""
	if s.HolderIdentity != nil {
		holder = *s.HolderIdentity
	}
	if holder != l.Identity {
		return Term{}, fmt.Errorf("not admitting: Lease %s/%s is held by %q, not by this instance (%q)", l.Namespace, l.Name, holder, l.Identity)
	}
	if s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return Term{}, fmt.Errorf("not admitting: Lease %s/%s has no renewTime or leaseDurationSeconds", l.Namespace, l.Name)
	}
	deadline := s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)
	if left := deadline.Sub(now()); left < l.Margin {
		return Term{}, fmt.Errorf("not admitting: Lease %s/%s runs out in %s (renewed %s), less than the %s an admission needs", l.Namespace, l.Name, left.Round(time.Millisecond), s.RenewTime.Format(time.RFC3339Nano), l.Margin)
	}
	transitions := int32(0)
	if s.LeaseTransitions != nil {
		transitions = *s.LeaseTransitions
	}
	return Term{Name: fmt.Sprintf("%s/%d", l.Identity, transitions), Deadline: deadline.Add(-l.Margin / 2)}, nil
}
