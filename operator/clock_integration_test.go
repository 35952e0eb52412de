package operator_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/serverclock"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/policy"
	"github.com/slipway-dev/slipway/operator/stall"
)

// One clock for failures and resumes: an operator whose node's clock runs four minutes ahead of the API
// server stamps a failure with the API server's clock (learned from its responses, as update-operator
// wires it), the clock kubectl slipway dates a resume by. So a person's resume --failures, given after
// the failure, forgives it and the next node goes; stamped by the node's clock the failure would date
// minutes after the resume and keep the fleet paused.
func TestOneClockForFailuresAndResumes(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns = "slipway-oneclock"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	nodes := simNodes(t, "clk", 2)
	nodes[0].NeverComeBack()
	clock := serverclock.New(func() time.Time { return time.Now().Add(4 * time.Minute) }, nil)
	rc := rest.CopyConfig(cp.RestConfig())
	rc.Wrap(clock.Transport)
	opClient, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	startOperator(t, opOptions{max: "1", rebootTimeout: 2 * time.Second, stallPolicy: stall.Release, now: clock.Now,
		spec:  func(s *policy.Spec) { s.MaxFailedReboots = 1 },
		tweak: func(c *operator.Config) { c.Namespace, c.Client = ns, opClient }})
	if err := nodes[0].SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	var rec fleetrecord.Record
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, fleetrecord.ConfigMapName, metav1.GetOptions{})
		if err == nil {
			if rec, err = fleetrecord.Decode(cm.Data[fleetrecord.Key]); err == nil && len(rec.Failures) > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failure recorded for the node that never came back: %v", err)
		}
	}
	// The API server runs on this machine: its clock is this test's.
	if f := rec.Failures[0]; f.At.Before(time.Now().Add(-time.Minute)) || f.At.After(time.Now().Add(time.Minute)) {
		t.Errorf("failure stamped %s, now is %s by the API server's clock: stamped by the operator's node's clock (four minutes ahead)", f.At, time.Now().UTC())
	}
	if off, known := clock.Offset(); !known || off > -3*time.Minute || off < -5*time.Minute {
		t.Errorf("the operator's clock learned an offset of %v (known %v), want about -4m", off, known)
	}
	// kubectl slipway resume --failures, a second after the failure by the API server's clock.
	resumeRecorded(t, ns, "", time.Now().Add(time.Second))
	if _, err := client.CoreV1().ConfigMaps(ns).Patch(ctx, fleetswitch.ConfigMapName, types.MergePatchType, fleetswitch.ResumeFailuresPatch(), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	// Held for a moment is no failure (the operator may see the node before the switch's change).
	for deadline := time.Now().Add(60 * time.Second); !finished(getNode(t, "clk-1")); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("clk-1 did not finish its cycle after resume --failures; blocked-by %q (the failure counts after the resume)",
				getNode(t, "clk-1").Annotations[protocol.BlockedBy])
		}
	}
}
