package operator_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/internal/updateengine"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/fence"
	"github.com/slipway-dev/slipway/operator/policy"
	"github.com/slipway-dev/slipway/operator/stall"
)

func inCycle(n *corev1.Node) bool {
	return protocol.Classify(protocol.Observe(n, protocol.Hooks{})).InCycle()
}

func stalledGauge(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return gaugeLabel(t, reg, "slipway_operator_stalled_nodes", "reason", reason)
}

// Why 4: a node granted its reboot that never comes back. With --reboot-timeout it is reported --
// annotation, Warning Event, metric -- and holds its budget slot (the default): the next node waits.
// With --stall-policy=release the slot is freed and the next node goes.
func TestNeverReturningNodeStalls(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	nodes := simNodes(t, "stall", 2)
	lost, next := nodes[0], nodes[1]
	lost.NeverComeBack()
	reg := prometheus.NewRegistry()
	stop := startOperator(t, opOptions{max: "1", rebootTimeout: 2 * time.Second, metrics: operator.NewMetrics(reg)})
	if err := lost.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	waitNode(t, lost.Name, 30*time.Second, "reboot granted", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	if err := next.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	n := waitNode(t, lost.Name, 30*time.Second, "stalled annotation", func(n *corev1.Node) bool { return n.Annotations[protocol.Stalled] != "" })
	if got := n.Annotations[protocol.Stalled]; got != stall.RebootTimeout {
		t.Errorf("stalled = %q, want %q", got, stall.RebootTimeout)
	}
	// Dated when seen: at or after the grant plus --reboot-timeout (RFC 3339: to the second).
	seen, err1 := time.Parse(time.RFC3339, n.Annotations[protocol.StalledAt])
	granted, err2 := time.Parse(time.RFC3339, n.Annotations[protocol.RebootOKTime])
	if err1 != nil || err2 != nil || seen.Before(granted) {
		t.Errorf("stalled-at %q, reboot-ok-time %q: want the stall dated when seen, after the grant", n.Annotations[protocol.StalledAt], n.Annotations[protocol.RebootOKTime])
	}
	if !waitEvent(t, lost.Name, "Stalled") {
		t.Error("no Stalled Warning Event")
	}
	if v := stalledGauge(t, reg, stall.RebootTimeout); v != 1 {
		t.Errorf("slipway_operator_stalled_nodes{reason=reboot-timeout} = %v, want 1", v)
	}
	// The per-node series name it: the stall alert and node-alert inhibition read them.
	if m := metricWithLabel(t, reg, "slipway_operator_node_in_cycle", "node", lost.Name); m == nil || m.GetGauge().GetValue() != 1 {
		t.Errorf("slipway_operator_node_in_cycle{node=%s}: %v, want 1", lost.Name, m)
	}
	if m := metricWithLabel(t, reg, "slipway_operator_node_info", "node", lost.Name); m == nil || labelOf(m, "stalled") != stall.RebootTimeout || labelOf(m, "state") != string(protocol.Rebooting) {
		t.Errorf("slipway_operator_node_info{node=%s}: %v, want stalled=%s state=rebooting", lost.Name, m, stall.RebootTimeout)
	}
	// Hold (default): the slot stays taken. The operator has looked at the next node since the stall
	// and still holds it for the budget.
	settled(t, next.Name)
	if n := getNode(t, next.Name); inCycle(n) || next.Boots() != 0 || !strings.HasPrefix(n.Annotations[protocol.BlockedBy], "budget: ") {
		t.Fatalf("with --stall-policy=hold the next node started (or was not held by the budget) while the stalled one holds the only slot: %v", n.Annotations)
	}
	stop()

	// Release: the stalled node's slot is free; the next node goes through its cycle.
	startOperator(t, opOptions{max: "1", rebootTimeout: 2 * time.Second, stallPolicy: stall.Release})
	waitNode(t, next.Name, 30*time.Second, "next node's cycle finished", finished)
	if next.Boots() != 1 {
		t.Errorf("next node booted %d times, want 1", next.Boots())
	}
	if n := getNode(t, lost.Name); n.Annotations[protocol.Stalled] != stall.RebootTimeout || !n.Spec.Unschedulable {
		t.Errorf("the lost node must stay cordoned and reported: unschedulable=%v %v", n.Spec.Unschedulable, n.Annotations)
	}
}

// Why 3a: after the reboot, before the operator finished the cycle (node still NotReady), reboot-needed
// turns true again (a second update staged). Before: the operator waited for the agent, the agent for
// reboot-ok to go false -- cordoned forever. Now the kubelet's new boot plus the agent having spoken in
// it finish the cycle, and the second update gets a cycle of its own.
func TestNeededAgainBeforeFinish(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	sn := simNodes(t, "again", 1)[0]
	w := watchBudget(t)
	sn.BackNotReady = true
	sn.OnReboot = func(n *simnode.Node, boot int) {
		ctx := context.Background()
		if boot != 1 {
			if _, err := testenv.SetNodeStatus(ctx, client, n.Name, n.BootID(), true); err != nil {
				t.Error(err)
			}
			return
		}
		// update_engine stages the next update (a level GetStatus reads, not only a signal the new
		// agent might not be subscribed for yet).
		if err := n.UE.Set(updateengine.Status{CurrentOperation: updateengine.StatusUpdatedNeedReboot, NewVersion: "4600.0.0"}); err != nil {
			t.Error(err)
		}
		go func() {
			time.Sleep(2 * time.Second)
			if _, err := testenv.SetNodeStatus(ctx, client, n.Name, n.BootID(), true); err != nil {
				t.Error(err)
			}
		}()
	}
	startOperator(t, opOptions{})
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	waitNode(t, sn.Name, 60*time.Second, "second cycle finished", func(n *corev1.Node) bool { return finished(n) && sn.Boots() == 2 })
	if got := w.Starts()[sn.Name]; got != 2 {
		t.Errorf("node entered the cycle %d times, want 2 (one per update)", got)
	}
	// finished includes the agent's reboot-needed=false in its third boot: it looked, and asks no more.
	if sn.Boots() != 2 {
		t.Errorf("booted %d times for two updates", sn.Boots())
	}
}

// Why 5: a node FLUO's agent cordoned (agent-made-unschedulable=true) whose FLUO agent was replaced by
// Slipway's mid-cycle. Nobody else will uncordon it: the operator does when the cycle ends.
func TestFLUOAgentCordonUncordoned(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	sn := simNodes(t, "fluocordon", 1)[0]
	ctx := context.Background()
	if _, err := client.CoreV1().Nodes().Patch(ctx, sn.Name, "application/merge-patch+json",
		[]byte(`{"spec":{"unschedulable":true},"metadata":{"annotations":{"`+protocol.AgentMadeUnschedulable+`":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	startOperator(t, opOptions{})
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	n := waitNode(t, sn.Name, 30*time.Second, "cycle finished", finished)
	if n.Spec.Unschedulable {
		t.Error("node cordoned by FLUO's agent stays cordoned after its cycle")
	}
	if got := n.Annotations[protocol.AgentMadeUnschedulable]; got != protocol.False {
		t.Errorf("agent-made-unschedulable = %q, want false", got)
	}
}

// An admin's cordon still stays (only FLUO's agent's and Slipway's own are undone); see also
// TestAdminCordonStays. Here: reboot-paused with a typo holds the node (fail closed).
func TestMalformedPauseHolds(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	sn := simNodes(t, "typo", 1)[0]
	annotate(t, sn.Name, map[string]*string{protocol.RebootPaused: ptr("True")})
	startOperator(t, opOptions{})
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	if !waitEvent(t, sn.Name, "MalformedAnnotation") {
		t.Error("no MalformedAnnotation Event for reboot-paused=True")
	}
	// The node asks, and the operator has read that (with the typo'd pause) and held it.
	waitNode(t, sn.Name, 20*time.Second, "asking", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
	settled(t, sn.Name)
	if n := getNode(t, sn.Name); inCycle(n) || sn.Boots() != 0 {
		t.Fatalf("reboot-paused=True must hold the node: %v", n.Annotations)
	}
}

// Why 5: admissions are fenced by leadership. An operator that does not hold the Lease (a stalled old
// leader after a failover) admits nothing; once it holds it, it admits and writes its term.
func TestAdmissionFencedByLease(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns = "slipway-fence"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_ = client.CoordinationV1().Leases(ns).Delete(ctx, "fence", metav1.DeleteOptions{})
	setLease := func(holder string, transitions int32) { holdLease(t, ns, "fence", holder, transitions) }
	setLease("new-leader", 4)
	sn := simNodes(t, "fence", 1)[0]
	f := &fence.Lease{Client: client.CoordinationV1(), Namespace: ns, Name: "fence", Identity: "old-leader", Margin: 5 * time.Second}
	// The operator asks the fence before every admission: a refusal is its own word that it wanted to
	// admit the node and did not.
	refused := make(chan error, 1)
	check := func(ctx context.Context) (fence.Term, error) {
		term, err := f.Check(ctx)
		if err != nil {
			select {
			case refused <- err:
			default:
			}
		}
		return term, err
	}
	startOperator(t, opOptions{fence: check})
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-refused:
		t.Logf("the fence refused: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the operator never asked the fence to admit the node")
	}
	if n := getNode(t, sn.Name); inCycle(n) || n.Annotations[protocol.AdmittedBy] != "" {
		t.Fatalf("admitted while another instance holds the Lease: %v", n.Annotations)
	}
	setLease("old-leader", 5)
	n := waitNode(t, sn.Name, 30*time.Second, "admitted", func(n *corev1.Node) bool { return n.Annotations[protocol.AdmittedBy] != "" })
	if got := n.Annotations[protocol.AdmittedBy]; got != "old-leader/5" {
		t.Errorf("admitted-by = %q, want old-leader/5", got)
	}
	// The term is the cycle's: gone when it ends, so the next admission is fenced afresh.
	if n := waitNode(t, sn.Name, 30*time.Second, "cycle finished", finished); n.Annotations[protocol.AdmittedBy] != "" {
		t.Errorf("admitted-by %q left after the cycle", n.Annotations[protocol.AdmittedBy])
	}
}

// The fence's residue, closed by the API server: an admission the operator's own check passed (a
// leader whose check came before its stall or a partition) but that arrives after a successor took the
// Lease is refused by deploy/base/fence-policy.yaml and changes nothing; the operator keeps running and
// admits once it is in the Lease's term again.
func TestStaleAdmissionRefusedByTheAPIServer(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns, lease = "slipway-fence-api", "fence"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	holdLease(t, ns, lease, "new-leader", 5)
	if err := testenv.InstallAdmissionFence(ctx, client, ns, lease); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, "slipway-admission-fence", metav1.DeleteOptions{})
		_ = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, "slipway-admission-fence", metav1.DeleteOptions{})
		_ = client.CoordinationV1().Leases(ns).Delete(ctx, lease, metav1.DeleteOptions{})
	})
	sn := simNodes(t, "stale", 1)[0]
	// The operator's own check passes with the term it proved before it was cut off: old-leader/4.
	var term atomic.Value
	term.Store("old-leader/4")
	check := func(ctx context.Context) (fence.Term, error) {
		return fence.Term{Name: term.Load().(string), Deadline: time.Now().Add(10 * time.Second)}, nil
	}
	var tap testenv.LogTap
	startOperator(t, opOptions{fence: check, tap: &tap})
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	// Evidence the operator tried: its log carries the API server's refusal.
	const says = "slipway-admission-fence: refused: admitted in leadership term old-leader/4 but the leader Lease is in term new-leader/5"
	tap.Wait(t, 0, 30*time.Second, "the API server refusing the stale admission", func(l testenv.LogLine) bool {
		return l.Err != nil && strings.Contains(l.Err.Error(), says)
	})
	if n := getNode(t, sn.Name); inCycle(n) || n.Annotations[protocol.AdmittedBy] != "" {
		t.Fatalf("a stale admission landed: %v", n.Annotations)
	}
	// In the Lease's term again (the successor's identity), the same operator admits.
	term.Store("new-leader/5")
	n := waitNode(t, sn.Name, 30*time.Second, "admitted", func(n *corev1.Node) bool { return n.Annotations[protocol.AdmittedBy] != "" })
	if got := n.Annotations[protocol.AdmittedBy]; got != "new-leader/5" {
		t.Errorf("admitted-by = %q, want new-leader/5", got)
	}
	waitNode(t, sn.Name, 30*time.Second, "cycle finished", finished)
}

// Why 5: a Warning repeated on every sync (a malformed value that stays) used up client-go's per-object
// Event allowance (25, then one per 5 minutes) and starved the node's other Warnings. Now it is
// reported once per change, and a later Stalled Warning still arrives.
func TestNoisyWarningDoesNotStarveOthers(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	if _, err := testenv.CreateNode(ctx, client, "noisy-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	annotate(t, "noisy-0", map[string]*string{protocol.AgentMadeUnschedulable: ptr("maybe")})
	startOperator(t, opOptions{rebootTimeout: time.Second})
	for i := 0; i < 40; i++ { // 40 syncs of the node, each seeing the malformed value
		annotate(t, "noisy-0", map[string]*string{"example.com/touch": ptr(strings.Repeat("x", i+1))})
		time.Sleep(20 * time.Millisecond)
	}
	annotate(t, "noisy-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "noisy-0", 30*time.Second, "granted", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	// Nobody reboots it: it stalls after 1 s.
	if !waitEvent(t, "noisy-0", "Stalled") {
		t.Fatal("the Stalled Warning was starved")
	}
	l, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=noisy-0,reason=MalformedAnnotation"})
	if err != nil {
		t.Fatal(err)
	}
	total := int32(0)
	for _, e := range l.Items {
		total += e.Count
	}
	if total != 1 {
		t.Errorf("MalformedAnnotation recorded %d times for one unchanged value, want 1", total)
	}
}

// Why 4, the other stalls on the real API server: a drain a PDB keeps failing, a node paused in the
// middle of its cycle, and a node back in a new boot whose agent never reported in it (e.g. its image
// could not be pulled). Each gets its reason -- the first stall written on it, no other before --, a
// Stalled Event, and loses the annotation when it moves on.
//
// --reboot-timeout is an hour on the operator's clock (opClock), which the test passes only once every
// node is in the situation its reason names and the operator has read it (settled): no node can stall
// for another reason first, however slow the run.
func TestStallReasons(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	for _, n := range []string{"st-drain", "st-paused", "st-silent"} {
		if _, err := testenv.CreateNode(ctx, client, n, "boot-a", nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // what a run leaves would fail the next one's workload (go test -count)
		zero := int64(0)
		_ = client.PolicyV1().PodDisruptionBudgets("stall").Delete(ctx, "db", metav1.DeleteOptions{})
		_ = client.CoreV1().Pods("stall").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: "app=db"})
		_ = client.AppsV1().ReplicaSets("stall").Delete(ctx, "db", metav1.DeleteOptions{})
	})
	workload(t, "stall", "db", "st-drain", 1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "stall"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets("stall").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// st-silent has an agent that reported in boot-a.
	annotate(t, "st-silent", map[string]*string{protocol.BootID: ptr("boot-a")})
	const timeout = time.Hour
	clock := newOpClock()
	startOperator(t, opOptions{max: "3", drainTO: time.Second, retryBase: 300 * time.Millisecond, rebootTimeout: timeout, now: clock.Now})
	for _, n := range []string{"st-drain", "st-paused", "st-silent"} {
		annotate(t, n, map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	}
	waitNode(t, "st-paused", 30*time.Second, "granted", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	annotate(t, "st-paused", map[string]*string{protocol.RebootPaused: ptr(protocol.True)})
	waitNode(t, "st-silent", 30*time.Second, "granted", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	// st-silent reboots: the kubelet reports boot-b; its agent never comes back to say so.
	annotate(t, "st-silent", map[string]*string{protocol.RebootInProgress: ptr(protocol.True)})
	if _, err := testenv.SetNodeStatus(ctx, client, "st-silent", "boot-b", true); err != nil {
		t.Fatal(err)
	}
	waitNode(t, "st-drain", 30*time.Second, "drain failing", func(n *corev1.Node) bool { return n.Annotations[protocol.DrainError] != "" })
	want := map[string]string{"st-drain": stall.DrainFailing, "st-paused": stall.Paused, "st-silent": stall.AgentSilent}
	hist := map[string]*nodeHistory{}
	for node := range want {
		settled(t, node) // the operator has read everything above, and nothing stalled yet
		if s := getNode(t, node).Annotations[protocol.Stalled]; s != "" {
			t.Fatalf("%s stalled %q before --reboot-timeout passed on the operator's clock", node, s)
		}
		hist[node] = watchNode(t, node)
	}
	clock.Advance(timeout + time.Minute)
	for node, reason := range want {
		settled(t, node) // a sync since the deadline passed
		n := waitNode(t, node, 30*time.Second, "stalled", func(n *corev1.Node) bool { return n.Annotations[protocol.Stalled] != "" })
		if got := n.Annotations[protocol.Stalled]; got != reason {
			t.Errorf("%s: stalled %q, want %q", node, got, reason)
		}
		if other := hist[node].ever(t, func(n *corev1.Node) bool {
			s := n.Annotations[protocol.Stalled]
			return s != "" && s != reason
		}); other != nil {
			t.Errorf("%s: stalled %q at resourceVersion %s, want only %q", node, other.Annotations[protocol.Stalled], other.ResourceVersion, reason)
		}
		if !waitEvent(t, node, "Stalled") {
			t.Errorf("%s: no Stalled event", node)
		}
	}
	// Moving on clears it: the agent reports in the new boot and the cycle finishes.
	annotate(t, "st-silent", map[string]*string{protocol.BootID: ptr("boot-b"), protocol.RebootInProgress: ptr(protocol.False), protocol.RebootNeeded: ptr(protocol.False)})
	n := waitNode(t, "st-silent", 30*time.Second, "cycle finished", finished)
	if _, ok := n.Annotations[protocol.Stalled]; ok {
		t.Errorf("stalled annotation left after the cycle finished: %v", n.Annotations)
	}
}

// Why 4: /readyz fails when the controller has not made progress it should have. A real kube-apiserver
// is frozen (SIGSTOP) while a granted node's stall is due: the sync that reports it hangs in its PATCH,
// readiness fails and names why; thawed, the write lands and readiness comes back.
//
// The operator's clock is the test's (opClock): it is held a second short of the stall's deadline
// (--reboot-timeout, an hour after the grant) while the node's sync looks again every two seconds, and
// moved past it only once the API server is frozen, so the stall's PATCH comes after the freeze by
// construction. StuckAfter is a minute on that clock: no slow sync of a loaded run fails the first
// check, and the test moves the clock on while the PATCH hangs.
func TestReadyzWhenTheAPIServerHangs(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	sn := simNodes(t, "wedge", 1)[0]
	sn.NeverComeBack()
	var c *operator.Controller
	const timeout, stuckAfter = time.Hour, time.Minute
	clock := newOpClock()
	startOperator(t, opOptions{max: "1", rebootTimeout: timeout, now: clock.Now,
		tweak:   func(cfg *operator.Config) { cfg.StuckAfter = stuckAfter },
		started: func(ctrl *operator.Controller) { c = ctrl }})
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	n := waitNode(t, sn.Name, 30*time.Second, "reboot granted", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	if err := c.Ready(); err != nil {
		t.Fatalf("a leader waiting for a reboot is making progress: %v", err)
	}
	granted, err := time.Parse(time.RFC3339, n.Annotations[protocol.RebootOKTime])
	if err != nil {
		t.Fatalf("reboot-ok-time: %v", err)
	}
	deadline := granted.Add(timeout)
	clock.HoldAt(deadline.Add(-time.Second))
	settled(t, sn.Name) // synced on the held clock: not stalled, and it looks again in two seconds
	if s := getNode(t, sn.Name).Annotations[protocol.Stalled]; s != "" {
		t.Fatalf("stalled %q before its deadline on the operator's clock", s)
	}
	if err := cp.FreezeAPIServer(); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := cp.ThawAPIServer(); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer thaw()
	clock.Advance(2 * time.Second) // the stall is due: the next look reports it, and its PATCH hangs
	var notReady error
	for end := time.Now().Add(30 * time.Second); notReady == nil || !strings.Contains(notReady.Error(), "sync has been running"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			thaw()
			t.Fatalf("the stall report's PATCH hangs on a frozen API server, yet readiness does not say a sync is stuck (last: %v)", notReady)
		}
		clock.Advance(stuckAfter / 10) // time passes for the hanging sync: a tenth of StuckAfter a look
		notReady = c.Ready()
	}
	thaw()
	clock.Run()
	waitNode(t, sn.Name, 60*time.Second, "stall reported after the thaw", func(n *corev1.Node) bool { return n.Annotations[protocol.Stalled] == stall.RebootTimeout })
	for end := time.Now().Add(30 * time.Second); c.Ready() != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("still not ready after the API server came back: %v", c.Ready())
		}
	}
}

// An agent that says it is rebooting (reboot-in-progress=true) though no reboot-ok was granted: the
// node is stalled "ungranted" at once -- not after --reboot-timeout, not never -- with an Event, keeps
// its budget slot (it may be down; the next node waits), counts as no failed reboot, and is idle again
// once its agent resets the flag.
func TestUngrantedRebootIsSeen(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	for _, n := range []string{"ug-self", "ug-next"} {
		if _, err := testenv.CreateNode(ctx, client, n, "boot-a", nil); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	startOperator(t, opOptions{max: "1", rebootTimeout: time.Hour, metrics: operator.NewMetrics(reg),
		spec: func(s *policy.Spec) { s.MaxFailedReboots = 1 }})
	annotate(t, "ug-self", map[string]*string{protocol.RebootInProgress: ptr(protocol.True)})
	n := waitNode(t, "ug-self", 30*time.Second, "stalled ungranted", func(n *corev1.Node) bool { return n.Annotations[protocol.Stalled] != "" })
	if got := n.Annotations[protocol.Stalled]; got != stall.Ungranted {
		t.Errorf("stalled %q, want %q", got, stall.Ungranted)
	}
	if !waitEvent(t, "ug-self", "Stalled") {
		t.Error("no Stalled event")
	}
	if _, ok := n.Annotations[protocol.RebootFailed]; ok {
		t.Errorf("an ungranted reboot counted as a failed reboot: %v", n.Annotations)
	}
	annotate(t, "ug-next", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "ug-next", 30*time.Second, "held by the budget the ungranted node takes", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "budget:")
	})
	// Its agent resets the flag: no longer in a cycle, the stall goes, the slot is free.
	annotate(t, "ug-self", map[string]*string{protocol.RebootInProgress: ptr(protocol.False)})
	waitNode(t, "ug-self", 30*time.Second, "no longer stalled", func(n *corev1.Node) bool {
		_, ok := n.Annotations[protocol.Stalled]
		return !ok
	})
	waitNode(t, "ug-next", 30*time.Second, "admitted into the freed slot", func(n *corev1.Node) bool { return n.Annotations[protocol.CycleStarted] != "" })
	if v := counterLabel(t, reg, "slipway_operator_stalls_total", "reason", stall.Ungranted); v != 1 {
		t.Errorf(`slipway_operator_stalls_total{reason="ungranted"} = %v, want 1`, v)
	}
}

// labelOf is the value of label name on m ("" none).
func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// holdLease makes holder the holder of Lease ns/name in its transitions-th term (testenv.HoldLease).
func holdLease(t *testing.T, ns, name, holder string, transitions int32) {
	t.Helper()
	if err := testenv.HoldLease(context.Background(), client, ns, name, holder, transitions); err != nil {
		t.Fatal(err)
	}
}
