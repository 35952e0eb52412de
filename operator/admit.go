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
)

// admit asks admission whether a waiting node may start its cycle now and keeps its blocked-by
// annotation true to the answer (an admission's own PATCH removes it). It returns the node as written,
// whether it was admitted, when only time can change the answer, and done, which ends an admitted
// node's reservation (call it after the admission's PATCH).
func (c *Controller) admit(ctx context.Context, n *corev1.Node, state protocol.State, f protocol.Facts, log klog.Logger) (
	out *corev1.Node, admitted bool, retry time.Duration, done func(), err error) {
	done = func() {}
	if state != protocol.NeedsReboot || f.Paused {
		c.cfg.Notify.Unblocked(n.Name)
		if _, ok := n.Annotations[protocol.BlockedBy]; ok && state != protocol.NeedsReboot {
			n, err = c.markBlocked(ctx, n, admission.Pass, log)
		}
		return n, false, 0, done, err
	}
	d := c.admitter.Decide(ctx, n.Name, n, c.fleetSwitch(), c.cfg.Now(), c.lookup)
	if d.ActiveBlockers != nil {
		c.noteBlockers(d.ActiveBlockers)
	}
	if d.Admitted() {
		c.cfg.Notify.Unblocked(n.Name)
		return n, true, 0, func() {
			if d.Release() {
				c.queue.Add(waitingKey)
			}
		}, nil
	}
	if n, err = c.markBlocked(ctx, n, d.Verdict, log); err != nil {
		return nil, false, 0, done, err
	}
	c.cfg.Notify.Blocked(n.Name, d.String())
	return n, false, d.Retry, done, nil
}

// markBlocked keeps the node's blocked-by annotation equal to v ("<kind>: <reason>"; Pass removes
// it), with an Event when it changes: Normal `Waiting` for the quiet kinds (the plan working),
// Warning `Blocked` for the others (something a person may want to look at). It returns the node as
// written.
func (c *Controller) markBlocked(ctx context.Context, n *corev1.Node, v admission.Verdict, log klog.Logger) (*corev1.Node, error) {
	why := truncate(v.String(), 512)
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
	out, err := c.apply(ctx, &p, n)
	if err != nil {
		return nil, err
	}
	if why != "" {
		log.V(1).Info("not admitted", "why", why)
		typ, reason := corev1.EventTypeWarning, "Blocked"
		if v.Kind.Quiet() {
			typ, reason = corev1.EventTypeNormal, "Waiting"
		}
		c.cfg.Recorder.Event(n, typ, reason, why)
	}
	return out, nil
}

// drainDone reports whether the drain of the node's current cycle has finished in a way that lets the
// cycle go on: succeeded, or failed under --drain-failure-policy=force (said in an Event).
func (c *Controller) drainDone(n *corev1.Node, state protocol.State, log klog.Logger) bool {
	if state != protocol.Draining {
		return false
	}
	r, ok := c.drains.result(n.Name, n.Annotations[protocol.DrainStarted])
	if !ok || r.err != nil && c.cfg.Drain.Policy != DrainForce {
		return false
	}
	if r.err != nil {
		log.Info("drain failed; granting reboot-ok anyway (--drain-failure-policy=force)", "error", r.err.Error())
		c.cfg.Recorder.Event(n, corev1.EventTypeWarning, "DrainFailedForced", fmt.Sprintf("drain failed, granting reboot-ok anyway (--drain-failure-policy=force): %v", r.err))
	}
	return true
}
