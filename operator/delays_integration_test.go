package operator_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator/policy"
)

// kured's --drain-delay and --reboot-delay, on a real API server: the node is cordoned at its cycle's
// start and its pod stays until the drain delay passed; the drained node is granted its reboot only
// after the reboot delay. Each wait is seen in the operator's own words (the cycle table's row)
// while the pod is still there, or the grant still absent.
func TestKuredDrainAndRebootDelay(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	if _, err := testenv.CreateNode(ctx, client, "delay-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	workload(t, "delays", "web", "delay-0", 1)
	const drainDelay, rebootDelay = 3 * time.Second, 3 * time.Second
	var tap testenv.LogTap
	startOperator(t, opOptions{tap: &tap, spec: func(s *policy.Spec) {
		s.Drain.Delay, s.Drain.RebootDelay = metav1.Duration{Duration: drainDelay}, metav1.Duration{Duration: rebootDelay}
	}})
	mark := tap.Mark()
	annotate(t, "delay-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitRow := func(row string) {
		tap.Wait(t, mark, 30*time.Second, "the operator waiting: "+row, func(l testenv.LogLine) bool {
			return l.Msg == "waiting" && l.Values["node"] == "delay-0" && l.Values["because"] == row
		})
	}
	waitRow("drain started less than --drain-delay ago (cordoned, nothing evicted yet)")
	n, err := client.CoreV1().Nodes().Get(ctx, "delay-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	started, err := time.Parse(time.RFC3339, n.Annotations[protocol.DrainStarted])
	if !n.Spec.Unschedulable || err != nil {
		t.Fatalf("during the drain delay: unschedulable %v, drain-started %q; want cordoned, drain started", n.Spec.Unschedulable, n.Annotations[protocol.DrainStarted])
	}
	if podsOn(t, "delay-0") != 1 {
		t.Error("the pod was evicted during the drain delay")
	}
	waitRow("drain succeeded less than --reboot-delay ago")
	if podsOn(t, "delay-0") != 0 {
		t.Error("the reboot delay began before the drain finished")
	}
	if n, _ := client.CoreV1().Nodes().Get(ctx, "delay-0", metav1.GetOptions{}); n.Annotations[protocol.RebootOK] == protocol.True {
		t.Error("reboot-ok granted during the reboot delay")
	}
	n = waitNode(t, "delay-0", 30*time.Second, "reboot-ok after both delays", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	granted, err := time.Parse(time.RFC3339, n.Annotations[protocol.RebootOKTime])
	if err != nil {
		t.Fatalf("reboot-ok-time: %v", err)
	}
	// RFC 3339 to the second: either stamp may be up to a second early.
	if took := granted.Sub(started); took < drainDelay+rebootDelay-time.Second {
		t.Errorf("granted %s after the drain started, want at least %s (both delays)", took, drainDelay+rebootDelay)
	}
}
