package operator_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
)

// waiting-since: written with a held node's first blocked-by, kept through a leader change (the new
// leader reads it, it does not restart the count), removed when the node stops asking;
// slipway_operator_longest_wait_seconds reads it (0 when none waits).
func TestWaitingSince(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	for _, name := range []string{"wait-0", "wait-1"} {
		if _, err := testenv.CreateNode(ctx, client, name, "boot-a", nil); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	stop := startOperator(t, opOptions{metrics: operator.NewMetrics(reg)})
	annotate(t, "wait-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)}) // takes the only slot, never reboots
	waitNode(t, "wait-0", 20*time.Second, "wait-0 granted", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	if _, ok := getNode(t, "wait-0").Annotations[protocol.WaitingSince]; ok {
		t.Error("wait-0 was admitted at once, yet has waiting-since")
	}
	annotate(t, "wait-1", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	n := blockedBy(t, "wait-1", "budget")
	since, err := time.Parse(time.RFC3339, n.Annotations[protocol.WaitingSince])
	if err != nil || time.Since(since) > time.Minute {
		t.Fatalf("waiting-since %q on the held node (%v)", n.Annotations[protocol.WaitingSince], err)
	}
	// The mark is whole seconds, never later than the scrape. The gauge reads the operator's informer
	// cache, which sees the mark a moment after the API server does: wait for it there (bounded).
	waitGauge(t, reg, "slipway_operator_longest_wait_seconds", "", "", 10*time.Second,
		"wait-1 held since "+since.String(), func(v float64) bool { return v > 0 })
	// A leader change: the new leader keeps the mark it finds.
	stop()
	reg = prometheus.NewRegistry()
	startOperator(t, opOptions{metrics: operator.NewMetrics(reg)})
	settled(t, "wait-1")
	if got := getNode(t, "wait-1").Annotations[protocol.WaitingSince]; got != n.Annotations[protocol.WaitingSince] {
		t.Errorf("after a leader change waiting-since = %q, want the first %q", got, n.Annotations[protocol.WaitingSince])
	}
	annotate(t, "wait-1", map[string]*string{protocol.RebootNeeded: ptr(protocol.False)})
	waitNode(t, "wait-1", 20*time.Second, "no longer asking: waiting-since removed", func(n *corev1.Node) bool {
		_, ok := n.Annotations[protocol.WaitingSince]
		return !ok
	})
	waitGauge(t, reg, "slipway_operator_longest_wait_seconds", "", "", 10*time.Second,
		"no node waiting", func(v float64) bool { return v == 0 })
}
