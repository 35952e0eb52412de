package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// sync carries out the next step of one node: observe it, keep its stall report true, let admission
// decide if it waits to start, let the cycle table decide the action, and act. It returns how long to
// wait before looking again when only time can change the answer.
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	n, err := c.node(name)
	if apierrors.IsNotFound(err) {
		c.forgetNode(name)
		c.cfg.Remediation.Forget(ctx, name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	log := c.log.WithValues("node", name)
	if n, err = c.takeOverride(ctx, n, log); err != nil {
		return 0, err
	}
	f := c.observe(n, log)
	state := protocol.Classify(f)
	n, retry, err := c.markStall(ctx, n, state, &f, log)
	if err != nil {
		return 0, err
	}
	if c.cfg.Remediation != nil { // the stage's start is read only when a fence is on
		retry = minRetry(retry, c.cfg.Remediation.Sync(ctx, n, fenced(state, f), protocol.StageSince(state, n)))
	}
	if n, err = c.publishUpdate(ctx, n); err != nil {
		return 0, err
	}
	// The index holds this node as this sync sees it (an informer handler may still be on its way).
	c.reindex(name)
	if u, ok := c.settleUntil.Load(name); ok {
		// Settling ends with time: look again then, and the index lets the slot go.
		if d := u.(time.Time).Sub(c.cfg.Now()); d > 0 {
			retry = minRetry(retry, d+10*time.Millisecond)
		}
	}
	v := c.look(n, f, state)
	admitted, wait, done, pin, err := c.admit(ctx, &v, log)
	// An admitted node is held against every pool until the admission PATCH below has returned (and
	// our own write is in the index) or failed: admissions decided meanwhile count it.
	defer done()
	if err != nil {
		return 0, err
	}
	n, f = v.n, v.f
	f.Admitted = admitted
	f.DrainDone = c.drainDone(v, log)
	var undrainable string
	if state == protocol.Draining && v.pol.Drain.Policy == DrainSkip && v.drained && v.drain.err != nil {
		f.Undrainable, undrainable = true, v.drain.err.Error()
	}
	if f.DrainDone {
		var wait time.Duration
		f.VolumesAttached, wait = c.volumesHeld(v, log)
		retry = minRetry(retry, wait)
	}
	var delayed time.Duration
	f.DrainDelayed, f.RebootDelayed, delayed = c.delays(v, state, f.DrainDone)
	retry = minRetry(retry, delayed)
	state, row := protocol.Decide(f)
	retry = minRetry(retry, wait)
	switch row.Do {
	case protocol.None:
		return retry, nil
	case protocol.Wait:
		log.V(2).Info("waiting", "state", state, "because", row.When)
		return retry, nil
	case protocol.Drain:
		d, err := c.drain(ctx, v, log)
		return minRetry(d, retry), err
	}
	// Steering: an admission writes its policy's (the one it was decided under), a cycle's end the
	// pinned one's.
	steering := v.pol.Steer
	if admitted {
		steering = c.policies.ByPin(pin).Steer
	}
	s := step{n: n, f: f, from: state, row: row, now: c.cfg.Now(), hooks: c.cfg.Hooks, groupLabel: c.cfg.GroupLabel, steer: steering, policyPin: pin}
	s.undrainable = undrainable
	if row.Do == protocol.FailOldVersion {
		s.failed = fmt.Sprintf("%s: back on %q, rebooted for %q", FailOldVersion, n.Labels[protocol.Version], n.Annotations[protocol.RebootVersion])
	}
	if row.Do == protocol.GrantReboot && v.drained {
		s.pdbs = v.drain.pdbs
	}
	return 0, c.act(ctx, s, log)
}

// fenced: the node's remediation fences hold (remediation.Keeper): from its cordon until it is
// verified back, unless it stalled (then it is broken, and remediation is what it needs).
func fenced(state protocol.State, f protocol.Facts) bool { return state.InCycle() && f.Stalled == "" }

// fenced is the same for a node by name, from the index (Sweep's question).
func (c *Controller) fenced(name string) bool {
	n, err := c.node(name)
	if err != nil {
		return false
	}
	f := protocol.Observe(n, c.cfg.Hooks)
	return fenced(protocol.Classify(f), f)
}

// delays says whether kured's --drain-delay or --reboot-delay holds a draining node, and when to look
// again. The drain delay counts from drain-started (on the Node: a new leader keeps the same clock)
// and ends early once any attempt of this drain ran; the reboot delay from the end of the drain
// attempt that succeeded (in memory: a new leader drains again, finds nothing to evict, and waits the
// whole delay once more, the safe side).
func (c *Controller) delays(v view, state protocol.State, drainDone bool) (drainDelayed, rebootDelayed bool, retry time.Duration) {
	d := v.pol.Drain
	if state != protocol.Draining || d.Delay <= 0 && d.RebootDelay <= 0 {
		return false, false, 0
	}
	left := func(since, now time.Time, delay time.Duration) time.Duration {
		if delay <= 0 || since.IsZero() {
			return 0
		}
		return since.Add(delay).Sub(now)
	}
	if drainDone {
		// The drainer dates its attempts by the wall clock, not the controller's (tests move that one).
		if l := left(v.drain.at, time.Now(), d.RebootDelay); l > 0 {
			return false, true, l + 10*time.Millisecond
		}
		return false, false, 0
	}
	if v.drained {
		return false, false, 0 // an attempt ran already (the delay was set mid-drain): no going back
	}
	if l := left(protocol.StageSince(state, v.n), c.cfg.Now(), d.Delay); l > 0 {
		return true, false, l + 10*time.Millisecond
	}
	return false, false, 0
}

// observe reads the node's facts and reports malformed values once per change of them.
func (c *Controller) observe(n *corev1.Node, log klog.Logger) protocol.Facts {
	f := protocol.Observe(n, c.cfg.Hooks)
	bad := strings.Join(f.Malformed, ", ")
	var old string
	if v, ok := c.malformed.Load(n.Name); ok {
		old = v.(string)
	}
	if bad == old {
		return f
	}
	if bad == "" {
		c.malformed.Delete(n.Name) // one entry per node with bad values, not per node
		return f
	}
	c.malformed.Store(n.Name, bad)
	log.Info("malformed values (read as false; reboot-paused as paused)", "values", f.Malformed)
	c.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "MalformedAnnotation", "malformed values read as false (reboot-paused: as paused): %s", bad)
	return f
}

// act carries out a cycle step that writes the Node: the effects table says what it writes, records,
// notifies and counts (effects.go).
func (c *Controller) act(ctx context.Context, s step, log klog.Logger) error {
	e := effectOf(s.row.Do)
	name := s.n.Name
	p := e.patch(s)
	p.ResourceVersion = s.n.ResourceVersion
	actx := ctx
	if s.admission() && c.cfg.Fence != nil {
		// An admission: only in this leadership term, and written before the lease could pass on.
		term, err := c.cfg.Fence(ctx)
		if err != nil {
			return err
		}
		p.SetAnnotation(s.n, protocol.AdmittedBy, term.Name)
		var cancel context.CancelFunc
		actx, cancel = context.WithDeadline(ctx, term.Deadline)
		defer cancel()
	}
	if s.admission() {
		// Before the cordon, and in this leadership term: the remediation controllers are told first.
		c.cfg.Remediation.Admit(actx, s.n)
	}
	if v := s.n.Annotations[protocol.RebootVersion]; e.Do == protocol.Finish && v != "" {
		// Admitted by this operator for v, boot ID changed, back Ready on v: canary proof. It is in
		// the fleet record before the node is seen out of its cycle, so a leader killed in between
		// leaves a successor that knows the canary finished (and bakes it) rather than sending
		// another canary of v before the first one baked.
		if err := c.proved(actx, s.n, v, s.now); err != nil {
			return err
		}
	}
	if e.FreesSlot {
		// The node keeps its slot until what it spends of the failure budget is counted: no admission
		// may fall between the two, or one node starts after the fleet should have paused itself.
		defer c.hold(name)()
	}
	if _, err := c.apply(actx, p, s.n); err != nil {
		return err
	}
	if v := s.n.Annotations[protocol.RebootVersion]; e.Do == protocol.Finish && v != "" {
		// The cycle ended now, not when the step began: the record write before the PATCH (or the PATCH
		// itself, across an API server restart) may have taken seconds, and the bake counts from here.
		c.refinished(s.n, v, c.cfg.Now())
	}
	log.Info("cycle step", "from", s.from, "action", s.row.Do, "to", s.row.Next, "because", s.row.When)
	c.record(ctx, e, s)
	if s.row.Next.InCycle() != s.from.InCycle() {
		c.enqueueWaiting()
	}
	return nil
}

func minRetry(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
