package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/admission"
)

// A blocker that panics (here: for one node) or hangs (fleet-wide, for a while) holds the nodes it is
// asked about, with the failure as the reason, and the leader lives on: the other node is admitted
// and rebooted once the hang is over. Before the admission package every blocker ran unguarded in the
// controller, so a panic crashed the leader (and crash-looped it).
func TestBrokenBlockersHoldAndTheLeaderLives(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	nodes := simNodes(t, "broken", 2)
	hanging := make(chan struct{})
	panicky := admission.Func{N: "pods-on-node", F: func(_ context.Context, n *corev1.Node) (bool, string) {
		if n.Name == nodes[0].Name {
			var m map[string]int
			m["boom"]++ // assignment to entry in nil map
		}
		return false, ""
	}}
	hang := admission.Func{N: "prometheus-alerts", Fleet: true, F: func(ctx context.Context, _ *corev1.Node) (bool, string) {
		<-hanging // ignores ctx, as a broken plugin would
		return false, ""
	}}
	startOperator(t, opOptions{max: "2", tweak: func(c *operator.Config) {
		c.Blockers = []admission.Blocker{panicky, hang}
		c.BlockerTimeout = 300 * time.Millisecond
	}})
	for _, sn := range nodes {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	for _, sn := range nodes {
		waitNode(t, sn.Name, 30*time.Second, "held by the hanging fleet-wide blocker", func(n *corev1.Node) bool {
			return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "prometheus-alerts: check failed: ")
		})
	}
	close(hanging)
	waitNode(t, nodes[0].Name, 30*time.Second, "held by the panicking blocker", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "pods-on-node: check failed: panic: assignment to entry in nil map")
	})
	waitNode(t, nodes[1].Name, 60*time.Second, "rebooted by the same leader", finished)
	if n := getNode(t, nodes[0].Name); n.Annotations[protocol.RebootOK] == protocol.True || n.Spec.Unschedulable {
		t.Errorf("the node a panicking blocker holds was started: %v", n.Annotations)
	}
}
