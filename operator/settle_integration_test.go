package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/policy"
)

// firstAndSecond fires both nodes' updates and returns them in the order the operator admits them.
func firstAndSecond(t *testing.T, a, b string) (first, second string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, name := range []string{a, b} {
			if getNode(t, name).Annotations[protocol.CycleStarted] != "" {
				if name == a {
					return a, b
				}
				return b, a
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("neither node was admitted")
	return "", ""
}

// --settle-time: after a node finishes, its budget slot stays held that long; the next node waits
// with blocked-by "settling: ..." and starts no earlier.
func TestSettleTime(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	sns := simNodes(t, "settle", 2)
	startOperator(t, opOptions{spec: func(s *policy.Spec) { s.Settle.Time = metav1.Duration{Duration: 4 * time.Second} }})
	for _, sn := range sns {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	first, second := firstAndSecond(t, sns[0].Name, sns[1].Name)
	h := watchNode(t, second) // every version: the 4 s hold is seen however late the test looks
	done := waitNode(t, first, 60*time.Second, "the first node finished", finished)
	n := waitNode(t, second, 60*time.Second, "the second node admitted after the settle", func(n *corev1.Node) bool {
		return n.Annotations[protocol.CycleStarted] != ""
	})
	if h.ever(t, func(n *corev1.Node) bool {
		return n.Annotations[protocol.BlockedBy] == "settling: nodes that finished their cycle hold their slots: --settle-time 4s"
	}) == nil {
		t.Error("the second node was never held by the settle")
	}
	end, _ := time.Parse(time.RFC3339, done.Annotations[protocol.LastRebootTime])
	start, _ := time.Parse(time.RFC3339, n.Annotations[protocol.CycleStarted])
	// Both in whole seconds: the start is at least the settle after the end, less one second of rounding.
	if gap := start.Sub(end); gap < 3*time.Second {
		t.Errorf("second cycle started %s after the first finished, want >= the 4 s settle", gap)
	}
	waitNode(t, second, 60*time.Second, "the second node finished", finished)
}

// --settle-pdbs: the drain of the first node consumes the PDB's only allowed disruption; after the
// first node finishes, the second waits ("settling: ... PodDisruptionBudgets not yet back") until
// the evicted replica runs again and the PDB allows one disruption again, and only then is drained.
// settle-pdbs on the first node records what the PDB allowed before its drain.
func TestSettlePDBs(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	sns := simNodes(t, "spdb", 2)
	a, b := sns[0].Name, sns[1].Name
	workloadOn(t, "spdb", "db", a, b)
	dbPDB(t, "spdb")
	startOperator(t, opOptions{spec: func(s *policy.Spec) {
		s.Settle = policy.Settle{PDBs: true, Timeout: metav1.Duration{Duration: 5 * time.Minute}, TimeoutPolicy: "proceed"}
	}})
	for _, sn := range sns {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	first, second := firstAndSecond(t, a, b)
	done := waitNode(t, first, 60*time.Second, "the first node finished", finished)
	if got := done.Annotations[protocol.SettlePDBs]; got != "spdb/db=1" {
		t.Errorf("settle-pdbs on the first node = %q, want spdb/db=1", got)
	}
	n := waitNode(t, second, 20*time.Second, "the second node held until the PDB is back", func(n *corev1.Node) bool {
		why := n.Annotations[protocol.BlockedBy]
		return why == "settling: nodes that finished their cycle hold their slots: PodDisruptionBudgets not yet back: spdb/db (allows 0, allowed 1 before the drain)"
	})
	if n.Annotations[protocol.CycleStarted] != "" || n.Spec.Unschedulable {
		t.Fatalf("the second node started while the PDB was short: %v", n.Annotations)
	}
	// The replica comes back (what the ReplicaSet controller and the scheduler would do).
	rs, err := client.AppsV1().ReplicaSets("spdb").Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicaPod(t, rs, "db-again", first)
	waitNode(t, second, 60*time.Second, "the second node finished once the PDB was back", finished)
}

// dbPDB creates PDB db (minAvailable 1 of app=db) in ns and waits until it allows one disruption.
func dbPDB(t *testing.T, ns string) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets(ns).Create(context.Background(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPDBAllows(t, ns, "db", 1)
}

func waitPDBAllows(t *testing.T, ns, name string, want int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last policyv1.PodDisruptionBudgetStatus
	for time.Now().Before(deadline) {
		p, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == want {
			return
		}
		if err == nil {
			last = p.Status
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("PDB %s/%s never allowed %d disruptions (last status: allowed %d, healthy %d of %d expected, %d desired)", ns, name, want,
		last.DisruptionsAllowed, last.CurrentHealthy, last.ExpectedPods, last.DesiredHealthy)
}

// The PDB never comes back: after --settle-timeout a SettleTimeout Warning Event and
// slipway_operator_settle_timeouts_total; with --settle-timeout-policy=hold the slot stays held and
// the reason says so; with proceed (after a restart) the next node goes.
func TestSettleTimeout(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	sns := simNodes(t, "stmo", 2)
	a, b := sns[0].Name, sns[1].Name
	workloadOn(t, "stmo", "db", a, b)
	dbPDB(t, "stmo")
	reg := prometheus.NewRegistry()
	stop := startOperator(t, opOptions{metrics: operator.NewMetrics(reg), spec: func(s *policy.Spec) {
		s.Settle = policy.Settle{PDBs: true, Timeout: metav1.Duration{Duration: 3 * time.Second}, TimeoutPolicy: "hold"}
	}})
	for _, sn := range sns {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	first, second := firstAndSecond(t, a, b)
	waitNode(t, first, 60*time.Second, "the first node finished", finished)
	n := waitNode(t, second, 30*time.Second, "held past the timeout (hold)", func(n *corev1.Node) bool {
		return strings.Contains(n.Annotations[protocol.BlockedBy], "not back within --settle-timeout 3s, holding")
	})
	if n.Annotations[protocol.CycleStarted] != "" {
		t.Fatal("admitted under --settle-timeout-policy=hold")
	}
	if !waitEvent(t, first, "SettleTimeout") {
		t.Error("no SettleTimeout Event on the first node")
	}
	if got := counterValue(t, reg, "slipway_operator_settle_timeouts_total"); got != 1 {
		t.Errorf("slipway_operator_settle_timeouts_total = %v, want 1", got)
	}
	stop()
	startOperator(t, opOptions{spec: func(s *policy.Spec) {
		s.Settle = policy.Settle{PDBs: true, Timeout: metav1.Duration{Duration: 3 * time.Second}, TimeoutPolicy: "proceed"}
	}})
	waitNode(t, second, 60*time.Second, "the second node admitted after the timeout (proceed)", func(n *corev1.Node) bool {
		return n.Annotations[protocol.CycleStarted] != "" || finished(n)
	})
}

// counterValue reads an unlabelled counter from reg (0 when it has not been gathered yet).
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// --settle-pdbs waits for what this node's drain disturbed, never for headroom another lasting
// disruption took: a PDB allowing 3 before the first node's drain, whose evicted replica is not back
// and another of whose replicas is gone for good (a node down for repair, a crash-looping replica),
// allows 1 after the first node finished: the second node goes at once, not after --settle-timeout.
func TestSettlePDBsNotHostage(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	sns := simNodes(t, "hpdb", 3)
	a, b, other := sns[0].Name, sns[1].Name, sns[2].Name
	workloadOn(t, "hpdb", "db", a, b, other, other)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "hpdb"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets("hpdb").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPDBAllows(t, "hpdb", "db", 3)
	startOperator(t, opOptions{spec: func(s *policy.Spec) {
		s.Settle = policy.Settle{PDBs: true, Timeout: metav1.Duration{Duration: 10 * time.Minute}, TimeoutPolicy: "proceed"}
	}})
	for _, sn := range sns[:2] {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	first, second := firstAndSecond(t, a, b)
	// The lasting disruption, while the first node is in its cycle: a replica on the third node gone,
	// never replaced. When the first finishes the PDB allows 1 (4 replicas, its own evicted and this
	// one missing), never 3 again.
	if err := client.CoreV1().Pods("hpdb").Delete(ctx, "db-3", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	done := waitNode(t, first, 60*time.Second, "the first node finished", finished)
	if got := done.Annotations[protocol.SettlePDBs]; got != "hpdb/db=3" {
		t.Errorf("settle-pdbs on the first node = %q, want hpdb/db=3", got)
	}
	waitNode(t, second, 60*time.Second, "the second node finished, the first's settle not held by the other disruption", finished)
}
