package fleetlock

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
)

// Nodes is the Backend on a cluster. It finds a request's Node by the machine ID the kubelet reports
// and writes only the keys the agent would write for that node; granting, draining and verifying
// stay with the operator's cycle.
type Nodes struct {
	Client kubernetes.Interface
	// ByID returns the Nodes whose machine ID gives Zincati id id (Serve indexes its informer by it,
	// so a request costs a map lookup, not a hash of every node).
	ByID func(id string) ([]*corev1.Node, error)
	Now  func() time.Time
	// Switch returns the fleet switch's ConfigMap (nil: none); a paused fleet or group is said in the
	// reply to an ask, so Zincati logs why it waits.
	Switch func() *corev1.ConfigMap
	// RebootGrace is how long after a grant a steady-state report without a new boot ID is taken for
	// "the kubelet has not caught up yet" (an error, so Zincati retries) rather than "it did not reboot".
	RebootGrace time.Duration
}

func (n *Nodes) find(id string) (*corev1.Node, error) {
	matches, err := n.ByID(id)
	if err != nil {
		return nil, err
	}
	if len(matches) == 0 {
		return nil, &Error{Status: http.StatusNotFound, Kind: KindUnknownNode,
			Value: "no Node reports a machine ID (status.nodeInfo.machineID) whose Zincati id is " + id}
	}
	if len(matches) > 1 {
		// Cloned machine IDs: acting on either node could reboot the wrong one.
		return nil, &Error{Status: http.StatusConflict, Kind: KindUnknownNode,
			Value: fmt.Sprintf("nodes %s and %s share a machine ID; give each machine its own /etc/machine-id", matches[0].Name, matches[1].Name)}
	}
	found := matches[0]
	if found.Labels[protocol.FleetLockEnrolled] != protocol.True {
		return nil, &Error{Status: http.StatusForbidden, Kind: KindNotEnrolled,
			Value: fmt.Sprintf("node %s is not enrolled: label it %s=true (or start its kubelet with --node-labels=%s=true) to reboot it through FleetLock", found.Name, protocol.FleetLockEnrolled, protocol.FleetLockEnrolled)}
	}
	if found.Annotations[protocol.BootID] != "" {
		return nil, &Error{Status: http.StatusConflict, Kind: KindAgentNode,
			Value: fmt.Sprintf("node %s runs Slipway's update-agent; it must not also reboot through FleetLock", found.Name)}
	}
	return found, nil
}

// PreReboot asks for a reboot of the node (reboot-needed=true) and reports whether the operator has
// granted it in the boot the node is in now. What it writes is protocol.NodeTable's answer, the same
// the agent follows: a grant recorded for an earlier boot is never a second reboot, and a paused node
// is held. Writes are conditional on the Node's resourceVersion: an operator step in between makes
// this request fail (Zincati retries) instead of writing over what the operator just decided.
func (n *Nodes) PreReboot(ctx context.Context, id, group string) (bool, error) {
	node, err := n.find(id)
	if err != nil {
		return false, err
	}
	f := protocol.Observe(node, protocol.Hooks{})
	if was, ok := node.Annotations[protocol.FleetLockGroup]; ok && was != group && protocol.Classify(f) != protocol.Idle {
		// Asking in another group while waiting or mid-cycle would escape the first group's pause
		// (and, but for the operator's pin, its budget): the group stays until the cycle ends.
		return false, &Error{Status: http.StatusConflict, Kind: KindGroupChanged,
			Value: fmt.Sprintf("node %s asked in group %q and is waiting or in its cycle; it may ask in group %q after reporting steady state", node.Name, was, group)}
	}
	row := protocol.NodeDecide(protocol.NodeFacts{
		Needed: true, // Zincati asking is the need
		OK:     f.OK,
		// The operator always records the boot it granted in; with no record, no grant counts.
		GrantedThisBoot: protocol.GrantedThisBoot(node, protocol.CurrentBootID(node), false),
		Paused:          f.Paused,
	})
	if row.Is == protocol.NodeStaleGrant {
		// The last cycle has not finished yet: Zincati reports steady-state after its reboot, which
		// lets the operator verify and finish; a new ask waits until then, never rides on the old grant.
		return false, nil
	}
	p := nodes.Patch{ResourceVersion: node.ResourceVersion}
	p.ApplyEffects(node, protocol.NodeEffects[row.Do]...)
	if row.Do == protocol.NodeAsk {
		p.SetAnnotation(node, protocol.FleetLockID, id)
		p.SetAnnotation(node, protocol.FleetLockGroup, group) // its budget group, unless labelled
	}
	if _, err := p.Apply(ctx, n.Client, node); err != nil {
		return false, err
	}
	if row.Do == protocol.NodeAsk && n.Switch != nil {
		// Asked, and recorded; the operator will not admit it while the switch holds it.
		// The group Zincati asked in; an admin's --group-label may place the node elsewhere, which
		// the operator's blocked-by on the Node then says.
		if held, why := fleetswitch.Read(n.Switch()).Holds(group); held {
			return false, &Error{Status: http.StatusConflict, Kind: KindPaused, Value: why}
		}
	}
	return row.Do == protocol.NodeReboot, nil
}

// SteadyState says the node is up and not rebooting: the flags go back to false, as the agent resets
// them at start (NodeReport and NodeBack). The operator then finishes the cycle (verified by the
// kubelet's boot ID) or, if the node never rebooted, aborts it and uncordons. Right after a grant, a
// report without a new boot ID is answered with an error for RebootGrace, so that a kubelet slow to
// report its new boot is not mistaken for a node that did not reboot.
func (n *Nodes) SteadyState(ctx context.Context, id, group string) error {
	node, err := n.find(id)
	if err != nil {
		return err
	}
	f := protocol.Observe(node, protocol.Hooks{})
	if !f.Needed && !f.InProgress {
		return nil
	}
	if f.OK && !f.BootChanged {
		if t, err := time.Parse(time.RFC3339, node.Annotations[protocol.RebootOKTime]); err == nil && time.Since(t) < n.RebootGrace {
			return &Error{Status: http.StatusConflict, Kind: KindWaiting,
				Value: fmt.Sprintf("node %s was granted a reboot at %s and still reports the boot it had then; waiting for the kubelet", node.Name, t.Format(time.RFC3339))}
		}
	}
	p := nodes.Patch{ResourceVersion: node.ResourceVersion}
	p.ApplyEffects(node, protocol.NodeWrites(false, false)...)
	_, err = p.Apply(ctx, n.Client, node)
	return err
}
