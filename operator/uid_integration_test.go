package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/policy"
)

// Every Node write carries the UID of the Node it was computed for: a Node deleted and created again
// under the same name (cloud instance names, Cluster API) is another machine, and the API server
// refuses a write meant for the old one -- an annotation, a label or a cordon alike.
func TestNodeWritesCarryTheUID(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	mk := func() *corev1.Node {
		t.Helper()
		n, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "uid-a"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	old := mk()
	if err := client.CoreV1().Nodes().Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh := mk()
	if fresh.UID == old.UID {
		t.Fatal("the API server gave the new Node the old UID")
	}
	for _, build := range []func(p *nodes.Patch, n *corev1.Node){
		func(p *nodes.Patch, n *corev1.Node) { p.SetAnnotation(n, protocol.RebootOK, protocol.True) },
		func(p *nodes.Patch, n *corev1.Node) { p.SetLabel(n, protocol.BeforeReboot, protocol.True) },
		func(p *nodes.Patch, n *corev1.Node) { p.SetUnschedulable(n, true) }, // spec alone: still conditional
	} {
		var p nodes.Patch
		build(&p, old)
		if _, err := p.Apply(ctx, client, old); err == nil {
			t.Errorf("a write computed for the deleted Node (%s) landed on the new one", p.String())
		}
	}
	n := getNode(t, "uid-a")
	if n.Spec.Unschedulable || n.Annotations[protocol.RebootOK] != "" || n.Labels[protocol.BeforeReboot] != "" {
		t.Fatalf("the new Node was changed: unschedulable=%v %v %v", n.Spec.Unschedulable, n.Annotations, n.Labels)
	}
	var p nodes.Patch
	p.SetAnnotation(fresh, protocol.RebootOK, protocol.True)
	if out, err := p.Apply(ctx, client, fresh); err != nil || out.Annotations[protocol.RebootOK] != protocol.True {
		t.Fatalf("a write computed for the new Node: %v", err)
	}
}

// A Node deleted in its cycle (cluster-autoscaler removing the drained node, a machine health check
// replacing it) ends that cycle as replaced: its slot goes to the next node at once, nothing is counted
// as a failed reboot, and the Event and cycles_total{result="replaced"} say so.
func TestNodeDeletedInItsCycleIsReplaced(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	for _, name := range []string{"rep-0", "rep-1"} {
		readyNode(t, name, nil, map[string]string{protocol.RebootNeeded: protocol.True})
	}
	reg := prometheus.NewRegistry()
	startOperator(t, opOptions{max: "1", metrics: operator.NewMetrics(reg), tweak: func(c *operator.Config) {
		c.MaxFailedReboots = 1 // after MustCompile: the Spec refuses --max-failed-reboots without the --reboot-timeout this test runs without
	}})
	// No agent reboots it: the admitted node stays granted, holding the only slot.
	first, second := grantedOf(t, "rep-0", "rep-1")
	waitNode(t, second, 30*time.Second, "held by the budget", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "budget:")
	})
	if err := client.CoreV1().Nodes().Delete(ctx, first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNode(t, second, 30*time.Second, "admitted into the freed slot", func(n *corev1.Node) bool {
		return n.Annotations[protocol.CycleStarted] != ""
	})
	if v := counterLabel(t, reg, "slipway_operator_cycles_total", "result", "replaced"); v != 1 {
		t.Errorf(`cycles_total{result="replaced"} = %v, want 1`, v)
	}
	if v := counterLabel(t, reg, "slipway_operator_failed_reboots_total", "reason", "stalled") +
		counterLabel(t, reg, "slipway_operator_failed_reboots_total", "reason", "blocker"); v != 0 {
		t.Errorf("a replaced node was counted as a failed reboot (%v)", v)
	}
	// Events are written by the broadcaster after the fact: the slot may be given before it lands.
	waitTrue(t, 10*time.Second, "a CycleReplaced Event for the deleted node", func() bool { return events(t, first, "CycleReplaced") > 0 })
	if n := events(t, first, "CycleReplaced"); n != 1 {
		t.Errorf("%d CycleReplaced Events for the deleted node, want 1", n)
	}
	if n := getNode(t, second); strings.HasPrefix(n.Annotations[protocol.BlockedBy], "paused:") {
		t.Errorf("the fleet paused itself: %v", n.Annotations)
	}
}

// A fleet record the operator cannot read holds every admission (reading it as empty would lift every
// halt it holds), says why on the waiting nodes, and nothing is written over it; mended, the node goes.
func TestUnreadableRecordHoldsAdmissions(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns = "slipway-badrecord"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, fleetrecord.ConfigMapName, metav1.DeleteOptions{})
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetrecord.ConfigMapName}, Data: map[string]string{fleetrecord.Key: `{"failures":[{"node":`}}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyNode(t, "badrec", nil, map[string]string{protocol.RebootNeeded: protocol.True})
	startOperator(t, opOptions{tweak: func(c *operator.Config) { c.Namespace = ns }})
	waitNode(t, "badrec", 30*time.Second, "held: the record cannot be read", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "paused: fleet record unreadable: ConfigMap "+ns+"/"+fleetrecord.ConfigMapName)
	})
	if cm, _ := client.CoreV1().ConfigMaps(ns).Get(ctx, fleetrecord.ConfigMapName, metav1.GetOptions{}); cm.Data[fleetrecord.Key] != bad.Data[fleetrecord.Key] {
		t.Fatalf("the unreadable record was written over: %q", cm.Data[fleetrecord.Key])
	}
	cm, _ := client.CoreV1().ConfigMaps(ns).Get(ctx, fleetrecord.ConfigMapName, metav1.GetOptions{})
	cm.Data[fleetrecord.Key] = "{}"
	if _, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNode(t, "badrec", 30*time.Second, "admitted once the record was mended", func(n *corev1.Node) bool {
		return n.Annotations[protocol.CycleStarted] != ""
	})
}

// readyNode creates Node name, Ready in boot "boot-<name>" (testenv.CreateNode), with labels and
// annotations: a node without an agent whose keys a test writes itself.
func readyNode(t *testing.T, name string, labels, annotations map[string]string) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	if _, err := testenv.CreateNode(ctx, client, name, "boot-"+name, labels); err != nil {
		t.Fatal(err)
	}
	if len(annotations) > 0 {
		kv := map[string]*string{}
		for k, v := range annotations {
			kv[k] = strPtr(v)
		}
		annotate(t, name, kv)
	}
	return getNode(t, name)
}

// A canary granted its reboot for 4600.0.0 whose Node is deleted before --reboot-timeout (a
// MachineHealthCheck, cloud auto-repair, cluster-autoscaler: all act in minutes) is a failure of
// 4600.0.0: the fleet record keeps it (reason replaced, dated at the deletion), it holds the canary
// place and halts the version (--max-failed-per-version=1), so the next node asking for 4600.0.0 stays
// held -- the bad release does not walk through the fleet one replaced canary at a time. A node asking
// for another version goes; a node deleted before its grant counts for nothing; a person's resume
// releases the version.
func TestReplacedCanaryHoldsItsVersion(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns = "slipway-replaced"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, fleetrecord.ConfigMapName, metav1.DeleteOptions{})
	asking := func(v string) map[string]string {
		return map[string]string{protocol.RebootNeeded: protocol.True, protocol.NewVersion: v}
	}
	old := map[string]string{protocol.Version: "4599.0.0"}
	for _, name := range []string{"rc-0", "rc-1"} {
		readyNode(t, name, old, asking("4600.0.0"))
	}
	reg := prometheus.NewRegistry()
	startOperator(t, opOptions{max: "3", metrics: operator.NewMetrics(reg),
		spec: func(s *policy.Spec) {
			s.Canary = policy.Canary{Nodes: 1, Bake: metav1.Duration{Duration: time.Second}, MaxFailedPerVersion: 1}
		},
		tweak: func(c *operator.Config) { c.Namespace = ns }})
	// No agent reboots it: the canary stays granted, far from any reboot timeout.
	canary, next := grantedOf(t, "rc-0", "rc-1")
	waitNode(t, next, 30*time.Second, "held behind the canary", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "canary: 1 canaries of 4600.0.0 go first")
	})
	deleted := time.Now()
	if err := client.CoreV1().Nodes().Delete(ctx, canary, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The evidence that the operator looked: the halt on the node behind it.
	waitNode(t, next, 30*time.Second, "held: 4600.0.0 halted by the replaced canary", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "version-halted: 1 failed reboots for 4600.0.0")
	})
	if admittedNow(getNode(t, next)) {
		t.Fatalf("%s admitted for 4600.0.0 after its canary was replaced", next)
	}
	rec := readRecord(t, ns)
	var f *fleetrecord.Failure
	for i := range rec.Failures {
		if rec.Failures[i].Node == canary {
			f = &rec.Failures[i]
		}
	}
	if f == nil || f.Reason != fleetrecord.ReasonReplaced || f.Version != "4600.0.0" || f.Budget || f.At.Before(deleted.Add(-2*time.Second).Truncate(time.Second)) {
		t.Fatalf("the fleet record's failure for %s: %+v, want reason replaced for 4600.0.0, not on the budget, dated at the deletion", canary, f)
	}
	if v := counterLabel(t, reg, "slipway_operator_failed_reboots_total", "reason", "replaced"); v != 1 {
		t.Errorf(`failed_reboots_total{reason="replaced"} = %v, want 1`, v)
	}
	if events(t, canary, "CycleReplaced") != 1 {
		t.Error("no CycleReplaced Event for the deleted canary")
	}

	// Another version goes; a node deleted before its grant (held here by the halt) counts nothing.
	readyNode(t, "rc-other", old, asking("4700.0.0"))
	waitNode(t, "rc-other", 30*time.Second, "a canary of 4700.0.0 admitted", admittedNow)
	readyNode(t, "rc-early", old, asking("4600.0.0"))
	waitNode(t, "rc-early", 30*time.Second, "held by the halt", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "version-halted:")
	})
	if err := client.CoreV1().Nodes().Delete(ctx, "rc-early", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// A person resumes 4600.0.0: the next node is its canary.
	resumeRecorded(t, ns, "4600.0.0", time.Now().Add(time.Second))
	waitNode(t, next, 30*time.Second, "admitted once 4600.0.0 was resumed", admittedNow)
	for _, f := range readRecord(t, ns).Failures {
		if f.Node == "rc-early" {
			t.Errorf("a node deleted before its grant was recorded as a failure: %+v", f)
		}
	}
}

// grantedOf waits until one of a and b is granted its reboot (no agent takes it further) and returns
// it and the other.
func grantedOf(t *testing.T, a, b string) (granted, other string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for _, pair := range [][2]string{{a, b}, {b, a}} {
			if getNode(t, pair[0]).Annotations[protocol.RebootOK] == protocol.True {
				return pair[0], pair[1]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("neither %s nor %s granted within 30s", a, b)
		}
	}
}
