package operator_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// The whole path over real D-Bus and a real API server: a locksmithctl-style signal, the agent's
// annotations, the operator's cordon and drain, Reboot(false) on logind, the agent back with a new
// boot ID, and the cycle closed: uncordoned, reboot-ok=false, FLUO's final state.
func TestFullAgentPath(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	nodes := simNodes(t, "full", 1)
	sn := nodes[0]
	workload(t, "full", "app", sn.Name, 3)
	startOperator(t, opOptions{})
	bootBefore := sn.BootID()
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	n := waitNode(t, sn.Name, 30*time.Second, "reboot-ok", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	podsAtReboot := podsOn(t, sn.Name)
	if n.Annotations[protocol.RebootBootID] != bootBefore {
		t.Errorf("recorded boot ID %q, want %q", n.Annotations[protocol.RebootBootID], bootBefore)
	}
	n = waitNode(t, sn.Name, 30*time.Second, "cycle finished", finished)
	if podsAtReboot != 0 {
		t.Errorf("%d pods still on the node when reboot-ok was granted", podsAtReboot)
	}
	if calls := sn.Login.Calls(); len(calls) != 1 || calls[0] {
		t.Errorf("logind Reboot calls %v, want exactly one with interactive=false", calls)
	}
	if sn.BootID() == bootBefore || n.Status.NodeInfo.BootID != sn.BootID() || n.Annotations[protocol.BootID] != sn.BootID() {
		t.Errorf("boot ID: before %s, now %s, node reports %s / %s", bootBefore, sn.BootID(), n.Status.NodeInfo.BootID, n.Annotations[protocol.BootID])
	}
	if n.Spec.Unschedulable {
		t.Error("not uncordoned")
	}
	if n.Labels[protocol.RebootNeeded] != protocol.False {
		t.Errorf("reboot-needed label %q", n.Labels[protocol.RebootNeeded])
	}
	for _, k := range []string{protocol.DrainStarted, protocol.RebootBootID, protocol.RebootOKTime, protocol.Cordoned} {
		if _, ok := n.Annotations[k]; ok {
			t.Errorf("cycle marker %s left on the node", k)
		}
	}
	for _, reason := range []string{"Draining", "RebootGranted", "RebootCompleted"} {
		if !waitEvent(t, sn.Name, reason) {
			t.Errorf("no %s event", reason)
		}
	}
}
