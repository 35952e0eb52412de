package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/policy"
)

// Issue 40, declared versions (the flags' form; real API server, simulated agents on real D-Bus):
// a node that staged a denied version and one that staged a version outside the allowed range are
// held with reasons that name the version, the rule and the policy, and take no budget, while a node
// on an allowed version rolls through the same one-node budget.
func TestDeclaredVersionsHoldAndRoll(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	sns := simNodes(t, "ver", 3)
	startOperator(t, opOptions{max: "1", spec: func(s *policy.Spec) {
		s.Versions.Allow = []string{">=4600.0.0 <4700.0.0"}
		s.Versions.Deny = []string{"4600.0.1"}
	}})
	stageVersion(t, sns[0], "4600.0.1")
	stageVersion(t, sns[1], "4700.0.0")
	waitNode(t, sns[0].Name, 30*time.Second, "held: denied", func(n *corev1.Node) bool {
		return n.Annotations[protocol.BlockedBy] == "version: 4600.0.1 denied by the flags (deny: 4600.0.1)"
	})
	waitNode(t, sns[1].Name, 30*time.Second, "held: not allowed", func(n *corev1.Node) bool {
		return n.Annotations[protocol.BlockedBy] == "version: 4700.0.0 not allowed by the flags (allow: >=4600.0.0 <4700.0.0)"
	})
	// The held nodes take no budget: the allowed one goes through the one slot.
	stageVersion(t, sns[2], "4600.0.2")
	c := waitNode(t, sns[2].Name, 60*time.Second, "the node on an allowed version finished", finished)
	if c.Labels[protocol.Version] != "4600.0.2" {
		t.Fatalf("back on %q", c.Labels[protocol.Version])
	}
	for _, sn := range sns[:2] {
		if n := getNode(t, sn.Name); admittedNow(n) || !strings.HasPrefix(n.Annotations[protocol.BlockedBy], "version: ") {
			t.Errorf("%s: admitted or no longer held by its version: %v", sn.Name, n.Annotations)
		}
	}
}

// minAge counts from the fleet's first sighting of a version, kept in the fleet record: a new
// operator, and a node that staged the version after the first one's Node was deleted, wait for the
// same moment, and then the node goes.
func TestVersionMinAgeOutlivesOperatorAndNode(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	const ns = "slipway-versions"
	_, _ = client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	t.Cleanup(func() {
		_ = client.CoreV1().ConfigMaps(ns).Delete(context.Background(), fleetrecord.ConfigMapName, metav1.DeleteOptions{})
	})
	const minAge = 25 * time.Second
	opts := opOptions{max: "1", spec: func(s *policy.Spec) { s.Versions.MinAge = metav1.Duration{Duration: minAge} },
		tweak: func(c *operator.Config) { c.Namespace = ns }}
	first := simNodes(t, "age-a", 1)[0]
	stop := startOperator(t, opts)
	stageVersion(t, first, "4600.1.0")
	held := waitNode(t, first.Name, 30*time.Second, "held by minAge", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "version: 4600.1.0 allowed from ")
	})
	why := held.Annotations[protocol.BlockedBy]
	// The sighting is in the record before the operator stops.
	waitTrue(t, 30*time.Second, "the first sighting stored", func() bool {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), fleetrecord.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		v, err := fleetrecord.DecodeVersions(cm.Data[fleetrecord.VersionsKey])
		return err == nil && !v.FirstSeen("4600.1.0").IsZero()
	})
	stop()
	first.Stop()
	if err := client.CoreV1().Nodes().Delete(context.Background(), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := simNodes(t, "age-b", 1)[0]
	startOperator(t, opts)
	stageVersion(t, second, "4600.1.0")
	n := waitNode(t, second.Name, 30*time.Second, "held until the same moment", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "version: ") || admittedNow(n)
	})
	if got := n.Annotations[protocol.BlockedBy]; got != why {
		t.Fatalf("after a new operator and a deleted node: %q, want the first sighting's %q", got, why)
	}
	waitNode(t, second.Name, minAge+60*time.Second, "finished once the version is old enough", finished)
}
