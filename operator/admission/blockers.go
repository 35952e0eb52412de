package admission

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Blocker holds nodes back before admission (package blocker: pods, alerts, minimum Ready nodes;
// kured's RebootBlocker, with a reason). Check never returns an error: a failure to find out blocks,
// with the failure as its reason (fail closed). Name is its Kind.
type Blocker interface {
	Name() string
	Check(ctx context.Context, node *corev1.Node) (blocked bool, reason string)
}

// FleetWide is implemented by blockers whose answer does not depend on the node: they are asked once
// per decision, before the budget, and hold every waiting node alike.
type FleetWide interface{ FleetWide() bool }

// IsFleetWide reports whether b's answer is the same for every node.
func IsFleetWide(b Blocker) bool {
	f, ok := b.(FleetWide)
	return ok && f.FleetWide()
}

// Split separates the blockers whose answer holds for the whole fleet from those asked per node.
func Split(blockers []Blocker) (fleetWide, perNode []Blocker) {
	for _, b := range blockers {
		if IsFleetWide(b) {
			fleetWide = append(fleetWide, b)
		} else {
			perNode = append(perNode, b)
		}
	}
	return fleetWide, perNode
}

// Result is one blocker's verdict against a node.
type Result struct {
	Name   string // the blocker's Name()
	Reason string
}

// String is "name: reason", the form meant for the Node annotation and the Event.
func (r Result) String() string { return r.Name + ": " + r.Reason }

// DefaultCheckTimeout bounds one blocker's Check when the configuration does not.
const DefaultCheckTimeout = 30 * time.Second

// Bounded wraps b so that a Check that panics or does not answer within timeout blocks, with that as
// its reason, instead of crashing or wedging the caller. A check still running from an earlier call
// is not started again (it blocks, saying so): a blocker that hangs forever costs one goroutine, not
// one per decision.
func Bounded(b Blocker, timeout time.Duration) Blocker {
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	return &bounded{b: b, timeout: timeout}
}

type bounded struct {
	b       Blocker
	timeout time.Duration
	running atomic.Bool
}

func (g *bounded) Name() string    { return g.b.Name() }
func (g *bounded) FleetWide() bool { return IsFleetWide(g.b) }

func (g *bounded) Check(ctx context.Context, node *corev1.Node) (bool, string) {
	if !g.running.CompareAndSwap(false, true) {
		return true, fmt.Sprintf("check failed: an earlier check has not answered (over %s)", g.timeout)
	}
	type answer struct {
		blocked bool
		reason  string
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	done := make(chan answer, 1)
	go func() {
		defer cancel()
		a := func() (a answer) {
			defer func() {
				if p := recover(); p != nil {
					a = answer{true, fmt.Sprintf("check failed: panic: %v", p)}
				}
			}()
			blocked, reason := g.b.Check(ctx, node)
			return answer{blocked, reason}
		}()
		// Over before it is told: a caller that has the answer may ask again at once.
		g.running.Store(false)
		done <- a
	}()
	select {
	case a := <-done:
		return a.blocked, a.reason
	case <-time.After(g.timeout):
		return true, fmt.Sprintf("check failed: no answer within %s", g.timeout)
	}
}

// CheckAll runs every blocker against node and returns those that block, in the order given. A
// blocker that panics blocks too (fail closed); the panic is its reason. Blockers made by NewAdmitter
// are Bounded.
func CheckAll(ctx context.Context, blockers []Blocker, node *corev1.Node) []Result {
	var out []Result
	for _, b := range blockers {
		if blocked, reason := safeCheck(ctx, b, node); blocked {
			out = append(out, Result{Name: b.Name(), Reason: reason})
		}
	}
	return out
}

func safeCheck(ctx context.Context, b Blocker, node *corev1.Node) (blocked bool, reason string) {
	defer func() {
		if p := recover(); p != nil {
			blocked, reason = true, fmt.Sprintf("check failed: panic: %v", p)
		}
	}()
	return b.Check(ctx, node)
}

// Func makes a Blocker of a function: for tests and for one-off checks.
type Func struct {
	N     string
	Fleet bool
	F     func(ctx context.Context, node *corev1.Node) (bool, string)
}

func (f Func) Name() string    { return f.N }
func (f Func) FleetWide() bool { return f.Fleet }
func (f Func) Check(ctx context.Context, node *corev1.Node) (bool, string) {
	return f.F(ctx, node)
}
