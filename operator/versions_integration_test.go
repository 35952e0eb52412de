package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
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

// A pool's versions: its deny holds its node with the policy named; an edit of the policy releases
// the held node at once; a node admitted before the edit keeps its decision for its cycle (pinned)
// and finishes on a version the edit denies.
func TestPoolVersionsEditReleasesAndPinHolds(t *testing.T) {
	dyn := needPools(t)
	cleanNodes(t)
	sns := simNodes(t, "pv", 2)
	for _, sn := range sns {
		label(t, sn.Name, map[string]string{"pool": "prod"})
	}
	createPolicy(t, dyn, "prod", v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", "prod"), MaxUnavailable: ptr(intstr.FromInt32(2)),
		Versions: &v1alpha1.Versions{Deny: []string{"4600.2.0"}}})
	hold := "example.com/hold"
	startOperator(t, opOptions{max: "2", before: []string{hold}, tweak: func(c *operator.Config) { c.Dynamic = dyn }})
	waitPolicy(t, dyn, "prod", "counted its nodes", func(rp *v1alpha1.RebootPolicy) bool { return rp.Status.Nodes == 2 })
	held, pinned := sns[0], sns[1]
	stageVersion(t, held, "4600.2.0")
	waitNode(t, held.Name, 30*time.Second, "held by its pool's deny", func(n *corev1.Node) bool {
		return n.Annotations[protocol.BlockedBy] == "version: 4600.2.0 denied by rp/prod (deny: 4600.2.0)"
	})
	rp := waitPolicy(t, dyn, "prod", "reports the held version", func(rp *v1alpha1.RebootPolicy) bool {
		return condition(rp, "VersionsAllowed") == metav1.ConditionFalse
	})
	if len(rp.Status.Versions) != 1 || rp.Status.Versions[0].Version != "4600.2.0" || rp.Status.Versions[0].Held != "denied by 4600.2.0" {
		t.Errorf("status versions %+v, want 4600.2.0 held: denied by 4600.2.0", rp.Status.Versions)
	}
	stageVersion(t, pinned, "4600.2.1")
	waitNode(t, pinned.Name, 30*time.Second, "admitted, waiting for its hook", func(n *corev1.Node) bool { return n.Labels[protocol.BeforeReboot] == protocol.True })
	// The edit: 4600.2.0 allowed, 4600.2.1 denied.
	patchPolicy(t, dyn, "prod", map[string]interface{}{"spec": map[string]interface{}{"versions": map[string]interface{}{"deny": []string{"4600.2.1"}}}})
	waitNode(t, held.Name, 30*time.Second, "released by the edit", func(n *corev1.Node) bool { return n.Labels[protocol.BeforeReboot] == protocol.True })
	for _, sn := range sns {
		annotate(t, sn.Name, map[string]*string{hold: ptr(protocol.True)})
	}
	for _, c := range []struct {
		sn      *simnode.Node
		version string
	}{{held, "4600.2.0"}, {pinned, "4600.2.1"}} {
		n := waitNode(t, c.sn.Name, 60*time.Second, "finished", finished)
		if n.Labels[protocol.Version] != c.version {
			t.Errorf("%s back on %q, want %s", c.sn.Name, n.Labels[protocol.Version], c.version)
		}
	}
}

// A person's halt of a version (as kubectl slipway pause --version writes it) holds the nodes that
// staged it whatever the policy says, naming who and why; a resume of the version (as resume
// --version writes it) lets them go.
func TestPersonHaltsAVersion(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	const ns = "slipway-halts"
	ctx := context.Background()
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, fleetrecord.ConfigMapName, metav1.DeleteOptions{})
	t.Cleanup(func() {
		_ = client.CoreV1().ConfigMaps(ns).Delete(context.Background(), fleetrecord.ConfigMapName, metav1.DeleteOptions{})
	})
	halted := time.Now().UTC().Truncate(time.Second)
	var vers fleetrecord.Versions
	vers.AddHalt(fleetrecord.Halt{Version: "4600.3.0", By: "alice", At: halted, Why: "kernel regression"})
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetrecord.ConfigMapName},
		Data: map[string]string{fleetrecord.VersionsKey: vers.Encode()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sn := simNodes(t, "halt", 1)[0]
	startOperator(t, opOptions{max: "1", tweak: func(c *operator.Config) { c.Namespace = ns }})
	stageVersion(t, sn, "4600.3.0")
	want := "version-halted: 4600.3.0 halted by alice at " + halted.Format(time.RFC3339) + ": kernel regression; kubectl slipway resume --version 4600.3.0 releases it"
	waitNode(t, sn.Name, 30*time.Second, "held by the person's halt", func(n *corev1.Node) bool { return n.Annotations[protocol.BlockedBy] == want })
	// resume --version: a resume in the record, and the halt lifted, in one write.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, fleetrecord.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rec, err := fleetrecord.Decode(cm.Data[fleetrecord.Key])
		if err != nil {
			return false, err
		}
		rec.AddResume(fleetrecord.Resume{Version: "4600.3.0", By: "bob", At: halted.Add(time.Second), Why: "fixed upstream"})
		v, err := fleetrecord.DecodeVersions(cm.Data[fleetrecord.VersionsKey])
		if err != nil {
			return false, err
		}
		v.Lift("4600.3.0", "bob", halted.Add(time.Second))
		cm.Data[fleetrecord.Key], cm.Data[fleetrecord.VersionsKey] = rec.Encode(), v.Encode()
		_, err = client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		return err == nil, nil // a conflict with the operator's own write: read again
	})
	if err != nil {
		t.Fatal(err)
	}
	waitNode(t, sn.Name, 60*time.Second, "finished once the version is resumed", finished)
}
