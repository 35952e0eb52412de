package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator"
)

// A break-glass change of Slipway's keys carries update.slipway.dev/override ("<who>: <why>", checked by
// the admission policy slipway-node-keys, deploy TestKeysPolicy): the operator reports it as an Override
// Warning Event with who and why, counts it, and removes the annotation so the next override must say
// its own. A node without one gets no such Event.
func TestBreakGlassOverrideIsReported(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	why := "oncall: the release was fine, INC-42"
	readyNode(t, "ovr-0", nil, map[string]string{protocol.Override: why})
	readyNode(t, "ovr-1", nil, map[string]string{protocol.RebootNeeded: protocol.True})
	reg := prometheus.NewRegistry()
	startOperator(t, opOptions{max: "1", metrics: operator.NewMetrics(reg)})

	waitNode(t, "ovr-0", 30*time.Second, "the override annotation removed", func(n *corev1.Node) bool {
		_, ok := n.Annotations[protocol.Override]
		return !ok
	})
	// ovr-1 admitted: the operator has looked at both nodes.
	waitNode(t, "ovr-1", 30*time.Second, "ovr-1 admitted", func(n *corev1.Node) bool { return n.Spec.Unschedulable })
	if !waitEvent(t, "ovr-0", "Override") {
		t.Fatal("no Override Event for the break-glass change")
	}
	l, err := client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=ovr-0,reason=Override"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].Type != corev1.EventTypeWarning || !strings.Contains(l.Items[0].Message, why) {
		t.Errorf("Override Events %+v, want one Warning naming %q", l.Items, why)
	}
	if events(t, "ovr-1", "Override") != 0 {
		t.Error("an Override Event for a node nobody overrode")
	}
	if got := counterValue(t, reg, "slipway_operator_overrides_total"); got != 1 {
		t.Errorf("slipway_operator_overrides_total %v, want 1", got)
	}
}
