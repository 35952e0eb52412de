package operator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/notify"
	"github.com/slipway-dev/slipway/operator/stall"
)

// markStall keeps the node's stalled annotation true to stall.Of: set with a Warning Event, a metric
// and a notification when the node has been in its stage longer than RebootTimeout, removed when it
// moved on. It returns the node as written (its new resourceVersion is what the next PATCH must be
// conditional on) and, while the node is not stalled yet, when to look again.
func (c *Controller) markStall(ctx context.Context, n *corev1.Node, state protocol.State, f *protocol.Facts, log klog.Logger) (*corev1.Node, time.Duration, error) {
	now := c.cfg.Now()
	reason, at := stall.Of(state, *f, n, now, c.cfg.RebootTimeout)
	var retry time.Duration
	if reason == "" && !at.IsZero() {
		retry = at.Sub(now) + time.Second // look again when it would stall, if nothing else happens first
	}
	if reason == f.Stalled {
		return n, retry, nil
	}
	postGrant := reason != "" && reason != stall.Ungranted && stall.PostGrant(state)
	if postGrant {
		// This may free the node's slot (--stall-policy=release) and spends the failure budget: the
		// node keeps its slot until the failure is counted, so no admission falls between the two.
		defer c.hold(n.Name)()
	}
	p := nodes.Patch{ResourceVersion: n.ResourceVersion}
	if reason == "" {
		p.DeleteAnnotation(n, protocol.Stalled)
		p.DeleteAnnotation(n, protocol.StalledAt)
	} else {
		p.SetAnnotation(n, protocol.Stalled, reason)
		if f.Stalled == "" { // dated when first seen; a change of reason keeps the date
			p.SetAnnotation(n, protocol.StalledAt, now.UTC().Format(time.RFC3339))
		}
	}
	failed := postGrant && c.cfg.MaxFailedReboots > 0
	if failed {
		// The failure is recorded on the Node with the stall, so every later leader counts it.
		p.SetAnnotation(n, protocol.RebootFailed, failureMark(now, "stalled: "+reason))
	}
	out, err := c.apply(ctx, &p, n)
	if err != nil {
		return nil, 0, err
	}
	if reason == "" {
		log.Info("node no longer stalled", "was", f.Stalled, "state", state)
		f.Stalled = ""
		return out, retry, nil
	}
	if failed {
		c.failedReboot(n, "stalled: "+reason, now)
	}
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.stalls.WithLabelValues(reason).Inc()
	}
	since := protocol.StageSince(state, n)
	hint := stall.Hint(reason, n)
	c.cfg.Notify.Notify(notify.Event{Kind: notify.KindStalled, Node: n.Name, Reason: reason, Took: now.Sub(since), Time: now,
		Detail: fmt.Sprintf("in stage %s (--reboot-timeout=%s): %s", state, c.cfg.RebootTimeout, hint)})
	log.Info("node stalled", "reason", reason, "state", state, "since", since)
	c.cfg.Recorder.Event(n, corev1.EventTypeWarning, "Stalled",
		fmt.Sprintf("%s for %s in stage %s (--reboot-timeout=%s): %s", reason, now.Sub(since).Round(time.Second), state, c.cfg.RebootTimeout, hint))
	if c.cfg.StallPolicy == stall.Release && postGrant {
		c.enqueueWaiting() // its slot is free now
	}
	f.Stalled = reason
	return out, 0, nil
}
