package operator

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
)

// takeOverride reports a break-glass change of Slipway's keys: the admission policy slipway-node-keys
// lets a person in the group slipway:break-glass change the operator's keys only in a write that also
// sets update.slipway.dev/override to "<their username>: <why>". The operator says so in a Warning
// Event (who and why, as the API server checked them) and a metric, then removes the annotation, so the
// next override has to say its own why. The node's cycle then goes on from whatever the keys say now.
func (c *Controller) takeOverride(ctx context.Context, n *corev1.Node, log klog.Logger) (*corev1.Node, error) {
	why, ok := n.Annotations[protocol.Override]
	if !ok {
		return n, nil
	}
	p := nodes.Patch{ResourceVersion: n.ResourceVersion}
	p.DeleteAnnotation(n, protocol.Override)
	out, err := c.apply(ctx, &p, n)
	if err != nil {
		return nil, err // the next sync reports it (once: the Event is only made after the removal)
	}
	why = truncate(why, 512)
	log.Info("Slipway's keys were changed by hand (break-glass)", "override", why)
	// The resourceVersion makes each override's message its own: the same words again later are
	// another override, not a repeat for the Event deduplication to drop.
	c.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "Override",
		"Slipway's keys on this node were changed by hand (group slipway:break-glass; Node resourceVersion %s), the cycle goes on from them: %s", n.ResourceVersion, why)
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.overrides.Inc()
	}
	return out, nil
}
