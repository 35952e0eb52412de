package operator_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator/policy"
)

const pendingTaint = "example.com/reboot-pending"

var gpuTaint = corev1.Taint{Key: "example.com/gpu", Value: "a100", Effect: corev1.TaintEffectNoSchedule}

func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect })
}

func steering(s *policy.Spec) {
	s.Steering = policy.Steering{PreferNoScheduleTaint: pendingTaint, ExcludeFromLoadBalancers: true,
		PreLabels:  []string{"example.com/reboot=rebooting", "remediation.medik8s.io/exclude-from-remediation=true"},
		PostLabels: []string{"example.com/reboot=done", "remediation.medik8s.io/exclude-from-remediation-"}}
}

// Steering over two real agents with budget 1: the node that waits for its turn carries the
// PreferNoSchedule taint beside the admin's NoSchedule taint; each node's cycle carries the
// load-balancer exclusion and the pre-reboot labels (NodeHealthCheck's exclusion label) and ends
// with them gone, the post-reboot label written and the waiting taint removed. A node whose owner
// excluded it from load balancers before keeps that label; the admin's taint is never touched.
func TestSteering(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	sns := simNodes(t, "steer", 2)
	ctx := context.Background()
	b, err := json.Marshal([]corev1.Taint{gpuTaint})
	if err != nil {
		t.Fatal(err)
	}
	taints := string(b)
	for _, sn := range sns {
		body := `{"spec":{"taints":` + taints + `}}`
		if sn == sns[1] {
			body = `{"metadata":{"labels":{"` + protocol.ExcludeFromLBs + `":""}},"spec":{"taints":` + taints + `}}`
		}
		if _, err := client.CoreV1().Nodes().Patch(ctx, sn.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	startOperator(t, opOptions{spec: steering})
	for _, sn := range sns {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	first, second := firstAndSecond(t, sns[0].Name, sns[1].Name)
	n := waitNode(t, second, 20*time.Second, "the waiting node tainted PreferNoSchedule", func(n *corev1.Node) bool {
		return n.Annotations[protocol.CycleStarted] == "" && hasTaint(n, pendingTaint, corev1.TaintEffectPreferNoSchedule) &&
			n.Annotations[protocol.PreferNoScheduleTaint] == pendingTaint
	})
	if !hasTaint(n, gpuTaint.Key, corev1.TaintEffectNoSchedule) {
		t.Errorf("the admin's taint was dropped: %v", n.Spec.Taints)
	}
	for _, name := range []string{first, second} {
		n := waitNode(t, name, 60*time.Second, "in its cycle with the pre-reboot labels", func(n *corev1.Node) bool {
			return n.Labels["example.com/reboot"] == "rebooting" && n.Labels["remediation.medik8s.io/exclude-from-remediation"] == "true"
		})
		if _, ok := n.Labels[protocol.ExcludeFromLBs]; !ok {
			t.Errorf("%s in its cycle without the load-balancer exclusion: %v", name, n.Labels)
		}
		n = waitNode(t, name, 60*time.Second, "finished with the post-reboot labels", func(n *corev1.Node) bool {
			return finished(n) && n.Labels["example.com/reboot"] == "done"
		})
		if _, ok := n.Labels["remediation.medik8s.io/exclude-from-remediation"]; ok {
			t.Errorf("%s: the post-reboot KEY- left the label: %v", name, n.Labels)
		}
		if hasTaint(n, pendingTaint, corev1.TaintEffectPreferNoSchedule) || n.Annotations[protocol.PreferNoScheduleTaint] != "" || n.Annotations[protocol.LBExcluded] != "" {
			t.Errorf("%s: the waiting taint or a mark outlived the cycle: %v %v", name, n.Spec.Taints, n.Annotations)
		}
		if !hasTaint(n, gpuTaint.Key, corev1.TaintEffectNoSchedule) {
			t.Errorf("%s: the admin's taint was dropped: %v", name, n.Spec.Taints)
		}
		_, excluded := n.Labels[protocol.ExcludeFromLBs]
		if owned := name == sns[1].Name; excluded != owned {
			t.Errorf("%s: load-balancer exclusion after the cycle %v, want %v (the owner's stays, Slipway's goes)", name, excluded, owned)
		}
	}
}

// The waiting taint follows the waiting: a node held by the budget is tainted; when it stops asking
// for a reboot the taint goes; asking again brings it back; paused, it goes again.
func TestPreferNoScheduleTaintFollowsTheWait(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	for _, name := range []string{"pns-0", "pns-1"} {
		if _, err := testenv.CreateNode(ctx, client, name, "boot-a", nil); err != nil {
			t.Fatal(err)
		}
	}
	startOperator(t, opOptions{spec: steering})
	// pns-0 takes the only slot and keeps it: granted, it never reboots (no agent).
	annotate(t, "pns-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "pns-0", 20*time.Second, "pns-0 granted", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	tainted := func(n *corev1.Node) bool {
		return hasTaint(n, pendingTaint, corev1.TaintEffectPreferNoSchedule) && n.Annotations[protocol.PreferNoScheduleTaint] == pendingTaint
	}
	untainted := func(n *corev1.Node) bool {
		return !hasTaint(n, pendingTaint, corev1.TaintEffectPreferNoSchedule) && n.Annotations[protocol.PreferNoScheduleTaint] == ""
	}
	annotate(t, "pns-1", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "pns-1", 20*time.Second, "waiting, tainted", tainted)
	annotate(t, "pns-1", map[string]*string{protocol.RebootNeeded: ptr(protocol.False)})
	waitNode(t, "pns-1", 20*time.Second, "no longer asking, untainted", untainted)
	annotate(t, "pns-1", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "pns-1", 20*time.Second, "asking again, tainted", tainted)
	annotate(t, "pns-1", map[string]*string{protocol.RebootPaused: ptr(protocol.True)})
	waitNode(t, "pns-1", 20*time.Second, "paused, untainted", untainted)
	if n := getNode(t, "pns-0"); hasTaint(n, pendingTaint, corev1.TaintEffectPreferNoSchedule) {
		t.Errorf("pns-0 never waited, yet it is tainted: %v", n.Spec.Taints)
	}
}

// Steering never clobbers a user's label, against the real API server with real agents: a node
// whose owner labelled it example.com/reboot=mine (a key --pre-reboot-node-labels sets) is held
// with blocked-by steering-label and its label untouched while another node runs its cycle; once the
// owner removes the label it goes. A node whose owner keeps exclude-from-remediation=true (the value
// the pre-reboot label sets, removed by the post-reboot KEY-) goes through its cycle and keeps the
// label, with a SteeringLabelsKept Event; only what Slipway set is in steering-labels.
func TestSteeringLeavesUsersLabels(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	const nhc, reboot = "remediation.medik8s.io/exclude-from-remediation", "example.com/reboot"
	sns := simNodes(t, "ownlabel", 2)
	kept, held := sns[0].Name, sns[1].Name
	ctx := context.Background()
	for name, body := range map[string]string{
		kept: `{"metadata":{"labels":{"` + nhc + `":"true"}}}`,
		held: `{"metadata":{"labels":{"` + reboot + `":"mine"}}}`,
	} {
		if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Budget 2: the held node is asked about (its blocker runs) while the other is in its cycle.
	startOperator(t, opOptions{max: "2", spec: steering})
	for _, sn := range sns {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	n := waitNode(t, held, 20*time.Second, "held: blocked-by steering-label", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "steering-label: ")
	})
	if !strings.Contains(n.Annotations[protocol.BlockedBy], reboot+"=mine (wants "+reboot+"=rebooting)") {
		t.Errorf("blocked-by does not say which label and what the flag wants: %q", n.Annotations[protocol.BlockedBy])
	}
	n = waitNode(t, kept, 60*time.Second, "the other node finished its cycle", func(n *corev1.Node) bool {
		return finished(n) && n.Labels[reboot] == "done"
	})
	if v, ok := n.Labels[nhc]; !ok || v != "true" {
		t.Errorf("%s: the owner's %s=true is gone or changed after the cycle's %s-: %v", kept, nhc, nhc, n.Labels)
	}
	if rec := n.Annotations[protocol.SteeringLabels]; rec != reboot+"=done" {
		t.Errorf("%s: steering-labels %q, want only what Slipway set (%s=done)", kept, rec, reboot)
	}
	if !waitEvent(t, kept, "SteeringLabelsKept") {
		t.Errorf("%s: no SteeringLabelsKept Event naming the label the cycle's end left alone", kept)
	}
	n = getNode(t, held)
	if n.Labels[reboot] != "mine" || n.Annotations[protocol.CycleStarted] != "" || n.Annotations[protocol.RebootOK] == protocol.True {
		t.Fatalf("%s: admitted or relabelled over its owner's label: labels %v, annotations %v", held, n.Labels, n.Annotations)
	}
	if events(t, held, "Blocked") == 0 {
		t.Errorf("%s: no Blocked Event", held)
	}
	// The owner removes the label: the node goes, and what Slipway writes now is Slipway's.
	if _, err := client.CoreV1().Nodes().Patch(ctx, held, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+reboot+`":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	n = waitNode(t, held, 60*time.Second, "finished once the owner's label is gone", func(n *corev1.Node) bool {
		return finished(n) && n.Labels[reboot] == "done"
	})
	if _, ok := n.Labels[nhc]; ok || n.Annotations[protocol.SteeringLabels] != reboot+"=done" {
		t.Errorf("%s: after its cycle labels %v, steering-labels %q", held, n.Labels, n.Annotations[protocol.SteeringLabels])
	}
}
