package operator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/policies"
)

// admit asks admission whether a waiting node may start its cycle now and keeps what a waiting node
// carries true to the answer: its blocked-by annotation (an admission's own PATCH removes it) and the
// --prefer-no-schedule-taint taint. It returns the node as written, whether it was admitted, when
// only time can change the answer, and done, which ends an admitted node's reservation (call it after
// the admission's PATCH), and pin, the policy it was admitted under (protocol.AdmittedPolicy's value).
func (c *Controller) admit(ctx context.Context, v *view, log klog.Logger) (admitted bool, retry time.Duration, done func(), pin string, err error) {
	done = func() {}
	n, state, f := v.n, v.state, v.f
	if state != protocol.NeedsReboot || f.Paused {
		blocked := &admission.Pass
		if state == protocol.NeedsReboot {
			// Wants a reboot, and a person paused it: held like any other node, so it is seen.
			blocked = &admission.NodePaused
			c.cfg.Notify.Blocked(n.Name, blocked.String())
		} else {
			c.cfg.Notify.Unblocked(n.Name)
		}
		taint := taintOff // not waiting for a turn: paused, or nothing to do
		if state.InCycle() {
			taint = taintKeep // the cycle's end removes it
		}
		v.n, err = c.markWaiting(ctx, v, blocked, taint, log)
		return false, 0, done, "", err
	}
	d := c.admitter.Decide(ctx, n.Name, n, c.store.View(), c.cfg.Now(), func(name string) (*corev1.Node, bool) {
		n, err := c.node(name)
		return n, err == nil
	})
	if d.ActiveBlockers != nil {
		c.store.NoteBlockers(d.ActiveBlockers)
	}
	if d.Admitted() {
		c.cfg.Notify.Unblocked(n.Name)
		return true, 0, func() {
			if d.Release() {
				c.lookAtWaiting()
			}
		}, policies.Pin(d.Policy), nil
	}
	if v.n, err = c.markWaiting(ctx, v, &d.Verdict, taintOn, log); err != nil {
		return false, 0, done, "", err
	}
	c.cfg.Notify.Blocked(n.Name, d.String())
	return false, d.Retry, done, "", nil
}

// taintWant says what markWaiting does with the waiting taint.
type taintWant int

const (
	taintKeep taintWant = iota
	taintOn
	taintOff
)

// markWaiting keeps the node's blocked-by annotation equal to blocked ("<kind>: <reason>"; Pass
// removes it, and waiting-since; nil leaves it; the first one also writes waiting-since), with an Event when it changes: Normal `Waiting` for the quiet kinds (the
// plan working), Warning `Blocked` for the others (something a person may want to look at); and puts
// the waiting taint on or off (steer.Config.Taint). One PATCH, none when nothing changes. It returns
// the node as written.
func (c *Controller) markWaiting(ctx context.Context, v *view, blocked *admission.Verdict, taint taintWant, log klog.Logger) (*corev1.Node, error) {
	n := v.n
	p := nodes.Patch{ResourceVersion: n.ResourceVersion}
	var why string
	if blocked != nil {
		why = truncate(blocked.String(), 512)
		if why == "" {
			p.DeleteAnnotation(n, protocol.BlockedBy)
			p.DeleteAnnotation(n, protocol.WaitingSince)
		} else {
			p.SetAnnotation(n, protocol.BlockedBy, why)
			if _, ok := n.Annotations[protocol.WaitingSince]; !ok {
				p.SetAnnotation(n, protocol.WaitingSince, c.cfg.Now().UTC().Format(time.RFC3339))
			}
		}
	}
	if taint != taintKeep {
		// The taint of the policy it waits under; one of another key (its pool or the flag changed) goes.
		v.pol.Steer.Taint(&p, n, taint == taintOn)
	}
	if p.Empty() {
		return n, nil
	}
	out, err := c.apply(ctx, &p, n)
	if err != nil {
		return nil, err
	}
	if _, changed := p.Annotations[protocol.BlockedBy]; changed && why != "" {
		log.V(1).Info("not admitted", "why", why)
		typ, reason := corev1.EventTypeWarning, "Blocked"
		if blocked.Kind.Quiet() {
			typ, reason = corev1.EventTypeNormal, "Waiting"
		}
		c.cfg.Recorder.Event(n, typ, reason, why)
	}
	return out, nil
}

// drainDone reports whether the drain of the node's current cycle has finished in a way that lets the
// cycle go on: succeeded, or failed under --drain-failure-policy=force (said in an Event).
func (c *Controller) drainDone(v view, log klog.Logger) bool {
	if v.state != protocol.Draining {
		return false
	}
	n, r := v.n, v.drain
	if !v.drained || r.err != nil && v.pol.Drain.Policy != DrainForce {
		return false
	}
	if r.err != nil {
		log.Info("drain failed; granting reboot-ok anyway (--drain-failure-policy=force or its policy's drain.failurePolicy)", "error", r.err.Error())
		c.cfg.Recorder.Event(n, corev1.EventTypeWarning, "DrainFailedForced", fmt.Sprintf("drain failed, granting reboot-ok anyway (--drain-failure-policy=force): %v", r.err))
	}
	return true
}
