package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
	"github.com/slipway-dev/slipway/internal/updateengine"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/policy"
)

func stageVersion(t *testing.T, sn *simnode.Node, v string) {
	t.Helper()
	if err := sn.UE.Set(updateengine.Status{CurrentOperation: updateengine.StatusUpdatedNeedReboot, NewVersion: v}); err != nil {
		t.Fatal(err)
	}
}

// admittedNow reports whether the node is in a cycle now, read off cycle-started alone (not the
// operator's own classification).
func admittedNow(n *corev1.Node) bool { return n.Annotations[protocol.CycleStarted] != "" }

// Per-version canaries: three nodes ask for 4600.0.0 with budget 3; one goes alone (the others wait,
// blocked-by canary), finishes on the new version (its agent's version label), the others wait out the
// bake, then go together. A watch sees every change: never two nodes of the version in their cycle
// before the bake passed.
func TestCanaries(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	sns := simNodes(t, "can", 3)
	// A node that shows up on 4600.0.0 without a cycle Slipway ran (new, replaced, rebooted by hand, or
	// an agent relabelling its own Node), with a last-reboot-time of its own: it proves nothing, and
	// the canary hold stands.
	fake := readyNode(t, "can-unproven", map[string]string{protocol.Version: "4600.0.0"}, map[string]string{protocol.LastRebootTime: "2020-01-01T00:00:00Z"})
	const bake = 3 * time.Second
	const ns = "slipway-canary"
	_, _ = client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	startOperator(t, opOptions{max: "3",
		spec:  func(s *policy.Spec) { s.Canary.Nodes, s.Canary.Bake = 1, metav1.Duration{Duration: bake} },
		tweak: func(c *operator.Config) { c.Namespace = ns }})
	// The referee: nodes in their cycle for 4600.0.0 at any instant, from a watch.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: fake.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	var canaryFinished time.Time
	peakBeforeBake := 0
	cycling := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || !strings.HasPrefix(n.Name, "can-") {
				continue
			}
			cycling[n.Name] = admittedNow(n)
			if t, err := time.Parse(time.RFC3339, n.Annotations[protocol.LastRebootTime]); err == nil && canaryFinished.IsZero() && n.Name != fake.Name {
				canaryFinished = t
			}
			count := 0
			for _, c := range cycling {
				if c {
					count++
				}
			}
			if canaryFinished.IsZero() || time.Now().Before(canaryFinished.Add(bake-time.Second)) {
				peakBeforeBake = max(peakBeforeBake, count)
			}
		}
	}()
	for _, sn := range sns {
		stageVersion(t, sn, "4600.0.0")
	}
	var first string
	deadline := time.Now().Add(30 * time.Second)
	for first == "" && time.Now().Before(deadline) {
		for _, sn := range sns {
			if admittedNow(getNode(t, sn.Name)) {
				first = sn.Name
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if first == "" {
		t.Fatal("no canary admitted")
	}
	for _, sn := range sns {
		if sn.Name == first {
			continue
		}
		waitNode(t, sn.Name, 20*time.Second, "held as not a canary", func(n *corev1.Node) bool {
			return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "canary: 1 canaries of 4600.0.0 go first") ||
				strings.HasPrefix(n.Annotations[protocol.BlockedBy], "canary: canaries of 4600.0.0 finished; baking until")
		})
	}
	c := waitNode(t, first, 60*time.Second, "the canary finished on 4600.0.0", finished)
	if c.Labels[protocol.Version] != "4600.0.0" {
		t.Fatalf("canary back on %q", c.Labels[protocol.Version])
	}
	for _, sn := range sns {
		waitNode(t, sn.Name, 60*time.Second, "finished on 4600.0.0", func(n *corev1.Node) bool {
			return finished(n) && n.Labels[protocol.Version] == "4600.0.0"
		})
	}
	cancel()
	<-done
	if peakBeforeBake != 1 {
		t.Errorf("nodes of 4600.0.0 in their cycle at once before the bake passed: %d, want 1", peakBeforeBake)
	}
	// The proof is the canary's cycle, kept by the fleet record under its UID; none for the node that
	// merely showed up on the version.
	rec := readRecord(t, ns)
	proofs := map[string]bool{}
	for _, p := range rec.Proofs {
		if p.Version == "4600.0.0" {
			proofs[p.Node] = true
			if p.Node == first && p.UID != string(c.UID) {
				t.Errorf("the canary's proof names UID %s, the Node is %s", p.UID, c.UID)
			}
		}
	}
	if !proofs[first] || proofs[fake.Name] || len(proofs) != 3 {
		t.Errorf("proofs of 4600.0.0: %v, want the three nodes Slipway rebooted onto it (canary %s), not %s", proofs, first, fake.Name)
	}
}

// --max-failed-per-version: the first node to reboot for 4600.0.0 rolls back; the others asking for it
// are halted (blocked-by version-halted) while a node asking for 4700.0.0 goes; kubectl slipway resume
// --version 4600.0.0 (its write to the fleet record) releases the halt, and nothing else does: not
// deleting the failed Node.
func TestVersionHalt(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns = "slipway-halt"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, fleetswitch.ConfigMapName, metav1.DeleteOptions{})
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sns := simNodes(t, "halt", 3)
	for _, sn := range sns {
		sn.RollBackNextUpdate()
	}
	startOperator(t, opOptions{max: "1",
		spec:  func(s *policy.Spec) { s.Canary.MaxFailedPerVersion = 1 },
		tweak: func(c *operator.Config) { c.Namespace = ns }})
	for _, sn := range sns[:2] {
		stageVersion(t, sn, "4600.0.0")
	}
	first, second := firstAndSecond(t, sns[0].Name, sns[1].Name)
	for _, sn := range sns {
		if sn.Name != first {
			sn.SetRollBack(false)
		}
	}
	waitNode(t, first, 60*time.Second, "the first failed as old-version", func(n *corev1.Node) bool { return n.Annotations[protocol.FailedVersion] == "4600.0.0" })
	n := waitNode(t, second, 30*time.Second, "the second halted", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "version-halted: 1 failed reboots for 4600.0.0")
	})
	if admittedNow(n) {
		t.Fatal("admitted for a halted version")
	}
	// The failed node goes away (cluster-autoscaler removes the empty, cordoned node; a machine health
	// check replaces it): the halt is the fleet's, not the Node's, and stays.
	for _, sn := range sns {
		if sn.Name == first {
			sn.Stop()
		}
	}
	if err := client.CoreV1().Nodes().Delete(ctx, first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if rec := readRecord(t, ns); len(rec.Halted(1)) != 1 || rec.Halted(1)[0] != "4600.0.0" {
		t.Fatalf("fleet record: %+v, want 4600.0.0 halted", rec)
	}
	// Another version goes on: its whole cycle is the evidence that the operator looked at the halted
	// node again (every freed slot gives each waiting node another look) after the Node was deleted.
	stageVersion(t, sns[2], "4700.0.0")
	waitNode(t, sns[2].Name, 60*time.Second, "a node asking for 4700.0.0 finished", func(n *corev1.Node) bool {
		return finished(n) && n.Labels[protocol.Version] == "4700.0.0"
	})
	if admittedNow(getNode(t, second)) {
		t.Fatal("the halted version's node was admitted meanwhile")
	}
	n = waitNode(t, second, 10*time.Second, "still halted", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "version-halted: 1 failed reboots for 4600.0.0")
	})
	if admittedNow(n) {
		t.Fatal("the halt was lifted by deleting the failed node")
	}
	resumeRecorded(t, ns, "4600.0.0", time.Now().Add(time.Second))
	waitNode(t, second, 60*time.Second, "released by resume --version", func(n *corev1.Node) bool {
		return finished(n) && n.Labels[protocol.Version] == "4600.0.0"
	})
}
