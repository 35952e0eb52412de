package operator

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
)

// publishUpdate keeps pool-group and pool-server on n saying what its pool declares (policies.Update),
// which its agent writes into update.conf. A key the pool does not declare is removed (the agent then
// leaves that line as it is); a node whose pool did not compile keeps what it has.
func (c *Controller) publishUpdate(ctx context.Context, n *corev1.Node) (*corev1.Node, error) {
	set, ok := c.policies.Update(n)
	if !ok {
		return n, nil
	}
	p := nodes.Patch{ResourceVersion: n.ResourceVersion}
	for key, v := range map[string]string{protocol.PoolGroup: set.Group, protocol.PoolServer: set.Server} {
		if v == "" {
			p.DeleteAnnotation(n, key)
		} else {
			p.SetAnnotation(n, key, v)
		}
	}
	if p.Empty() {
		return n, nil
	}
	return c.apply(ctx, &p, n)
}
