package operator_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/policy"
)

func kubectl(t *testing.T, args ...string) {
	t.Helper()
	dir, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "kubectl"), append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
}

func annotate(t *testing.T, node string, kv map[string]*string) {
	t.Helper()
	body := `{"metadata":{"annotations":{`
	first := true
	for k, v := range kv {
		if !first {
			body += ","
		}
		first = false
		if v == nil {
			body += `"` + k + `":null`
		} else {
			body += `"` + k + `":"` + *v + `"`
		}
	}
	body += `}}}`
	if _, err := client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// FLUO's README test, verbatim: annotate reboot-needed by hand. The node is cordoned, drained through
// the Eviction API and gets reboot-ok. Then the test plays FLUO's own agent (which writes none of
// Slipway's keys) through a reboot, and the cycle ends in FLUO's final state.
func TestFLUOReadmeAnnotateAndFLUOAgent(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	if _, err := testenv.CreateNode(ctx, client, "fluo-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	workload(t, "fluo", "web", "fluo-0", 2)
	startOperator(t, opOptions{})

	kubectl(t, "annotate", "node", "fluo-0", "--overwrite", "flatcar-linux-update.v1.flatcar-linux.net/reboot-needed=true")
	n := waitNode(t, "fluo-0", 30*time.Second, "reboot-ok", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	if !n.Spec.Unschedulable || n.Annotations[protocol.Cordoned] != protocol.True {
		t.Errorf("granted without Slipway's cordon: unschedulable=%v annotations=%v", n.Spec.Unschedulable, n.Annotations)
	}
	if got := podsOn(t, "fluo-0"); got != 0 {
		t.Errorf("reboot-ok granted with %d pods still on the node", got)
	}
	if n.Annotations[protocol.RebootBootID] != "boot-a" {
		t.Errorf("boot ID at grant = %q, want boot-a", n.Annotations[protocol.RebootBootID])
	}

	// FLUO's agent: reboot-in-progress, reboot, then reset both flags at start.
	annotate(t, "fluo-0", map[string]*string{protocol.RebootInProgress: ptr(protocol.True)})
	settled(t, "fluo-0") // the operator has read reboot-in-progress=true and done what it does about it
	if getNode(t, "fluo-0").Annotations[protocol.RebootOK] != protocol.True {
		t.Fatal("reboot-ok withdrawn while the node reboots")
	}
	if _, err := testenv.SetNodeStatus(ctx, client, "fluo-0", "boot-b", true); err != nil {
		t.Fatal(err)
	}
	annotate(t, "fluo-0", map[string]*string{protocol.RebootInProgress: ptr(protocol.False), protocol.RebootNeeded: ptr(protocol.False)})
	n = waitNode(t, "fluo-0", 30*time.Second, "cycle finished", finished)
	if n.Spec.Unschedulable {
		t.Error("Slipway cordoned the node and must uncordon it")
	}
	for _, reason := range []string{"Draining", "RebootGranted", "RebootCompleted"} {
		if !waitEvent(t, "fluo-0", reason) {
			t.Errorf("no %s event on the node", reason)
		}
	}
}

// A FLUO agent restarted without a reboot resets its flags in the same boot: the operator must not
// count that as a reboot. It ends the cycle (reboot-ok=false) so the agent can ask again.
func TestResetWithoutRebootIsNotAReboot(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	if _, err := testenv.CreateNode(context.Background(), client, "noreboot-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	startOperator(t, opOptions{})
	annotate(t, "noreboot-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "noreboot-0", 30*time.Second, "reboot-ok", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	annotate(t, "noreboot-0", map[string]*string{protocol.RebootInProgress: ptr(protocol.False), protocol.RebootNeeded: ptr(protocol.False)})
	n := waitNode(t, "noreboot-0", 30*time.Second, "cycle aborted", func(n *corev1.Node) bool {
		return n.Annotations[protocol.RebootOK] == protocol.False && !n.Spec.Unschedulable
	})
	if _, ok := n.Annotations[protocol.LastRebootTime]; ok {
		t.Error("an unverified reboot must not be recorded as done")
	}
	if !waitEvent(t, "noreboot-0", "CycleAborted") {
		t.Error("no CycleAborted warning event")
	}
}

// 10 nodes with real agents over real D-Bus signal at once; max-unavailable=3. A watch on every Node
// change proves no instant had more than 3 unavailable; every node rebooted exactly once.
func TestTenNodesMaxUnavailableThree(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	nodes := simNodes(t, "ten", 10)
	w := watchBudget(t)
	startOperator(t, opOptions{max: "3"})
	for _, sn := range nodes {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	for _, sn := range nodes {
		waitNode(t, sn.Name, 90*time.Second, "cycle finished", finished)
	}
	w.stop()
	if m := w.Max(); m > 3 {
		t.Errorf("at one instant %d nodes were unavailable, budget is 3", m)
	} else if m < 2 {
		t.Errorf("never more than %d node(s) at once: the budget of 3 was not used", m)
	}
	starts := w.Starts()
	for _, sn := range nodes {
		if sn.Boots() != 1 || len(sn.Login.Calls()) != 1 {
			t.Errorf("%s: %d reboots, %d logind calls; want exactly 1", sn.Name, sn.Boots(), len(sn.Login.Calls()))
		}
		if starts[sn.Name] != 1 {
			t.Errorf("%s entered the cycle %d times, want 1", sn.Name, starts[sn.Name])
		}
		if n := getNode(t, sn.Name); n.Spec.Unschedulable {
			t.Errorf("%s left cordoned", sn.Name)
		}
	}
	t.Logf("largest number of unavailable nodes at any instant: %d", w.Max())
}

// A PDB that forbids the eviction: no reboot-ok while it blocks, the failure is on the Node (annotation
// + Event), and the cycle goes on once the PDB allows.
func TestPDBBlocksUntilAllowed(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	if _, err := testenv.CreateNode(ctx, client, "pdb-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	workload(t, "pdb", "db", "pdb-0", 2)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets("pdb").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	history := watchNode(t, "pdb-0")
	mark := opEvents.mark()
	startOperator(t, opOptions{drainTO: 2 * time.Second, retryBase: 500 * time.Millisecond})
	annotate(t, "pdb-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	n := waitNode(t, "pdb-0", 30*time.Second, "drain error reported", func(n *corev1.Node) bool { return n.Annotations[protocol.DrainError] != "" })
	if n.Annotations[protocol.RebootOK] == protocol.True || !n.Spec.Unschedulable {
		t.Fatalf("blocked drain: reboot-ok=%q unschedulable=%v", n.Annotations[protocol.RebootOK], n.Spec.Unschedulable)
	}
	// Several retries, each a failed drain the operator reports; reboot-ok must never have appeared
	// in between (every version of the Node, through a watch).
	opEvents.waitCount(t, "pdb-0", mark, 3, 60*time.Second, "three failed drain attempts", func(e recordedEvent) bool { return e.Reason == "DrainFailed" })
	if granted := history.ever(t, func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True }); granted != nil {
		t.Fatalf("reboot-ok granted while the PDB blocks eviction: %v", granted.Annotations)
	}
	if podsOn(t, "pdb-0") != 2 {
		t.Fatalf("pods evicted despite the PDB")
	}
	if !waitEvent(t, "pdb-0", "DrainFailed") {
		t.Error("no DrainFailed event")
	}
	pdb, _ = client.PolicyV1().PodDisruptionBudgets("pdb").Get(ctx, "db", metav1.GetOptions{})
	pdb.Spec.MinAvailable = ptr(intstr.FromInt32(0))
	if _, err := client.PolicyV1().PodDisruptionBudgets("pdb").Update(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n = waitNode(t, "pdb-0", 30*time.Second, "reboot-ok after the PDB allows", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	if _, ok := n.Annotations[protocol.DrainError]; ok {
		t.Error("drain-error must be cleared once the drain succeeded")
	}
	if podsOn(t, "pdb-0") != 0 {
		t.Error("pods left on the node")
	}
}

// A paused node is left alone while another node goes through a whole cycle.
func TestPausedNodeSkipped(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	nodes := simNodes(t, "pause", 2)
	annotate(t, nodes[0].Name, map[string]*string{protocol.RebootPaused: ptr(protocol.True)})
	startOperator(t, opOptions{max: "2"})
	for _, sn := range nodes {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	waitNode(t, nodes[1].Name, 30*time.Second, "cycle finished", finished)
	// The paused node asked too, and the operator has read that and left it alone.
	waitNode(t, nodes[0].Name, 20*time.Second, "paused node asks", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
	// It is held like any other node that wants a reboot, so the status view, the blocked-nodes metric
	// and the pending-too-long alert see it (a node paused and forgotten never updates again).
	waitNode(t, nodes[0].Name, 20*time.Second, "blocked-by paused: node, with waiting-since", func(n *corev1.Node) bool {
		return n.Annotations[protocol.BlockedBy] == admission.NodePaused.String() && n.Annotations[protocol.WaitingSince] != ""
	})
	if events(t, nodes[0].Name, "Blocked") == 0 {
		t.Error("no Blocked Event for the paused node")
	}
	settled(t, nodes[0].Name)
	n := getNode(t, nodes[0].Name)
	if n.Spec.Unschedulable || n.Annotations[protocol.RebootOK] == protocol.True || n.Annotations[protocol.DrainStarted] != "" || nodes[0].Boots() != 0 {
		t.Fatalf("paused node was touched: %v", n.Annotations)
	}
	// Unpausing lets it go, and its hold goes with its admission.
	annotate(t, nodes[0].Name, map[string]*string{protocol.RebootPaused: nil})
	n = waitNode(t, nodes[0].Name, 30*time.Second, "cycle finished after unpause", finished)
	if _, ok := n.Annotations[protocol.BlockedBy]; ok {
		t.Errorf("blocked-by left after the cycle: %q", n.Annotations[protocol.BlockedBy])
	}
	if _, ok := n.Annotations[protocol.WaitingSince]; ok {
		t.Error("waiting-since left after the cycle")
	}
}

// Before- and after-reboot hooks hold the node until their annotations are "true".
func TestHooksHoldTheNode(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	nodes := simNodes(t, "hooks", 1)
	sn := nodes[0]
	before, after := "example.com/before-ok", "example.com/after-ok"
	startOperator(t, opOptions{before: []string{before}, after: []string{after}})
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	waitNode(t, sn.Name, 30*time.Second, "before-reboot label", func(n *corev1.Node) bool { return n.Labels[protocol.BeforeReboot] == protocol.True })
	settled(t, sn.Name)
	n := getNode(t, sn.Name)
	if n.Spec.Unschedulable || n.Annotations[protocol.RebootOK] == protocol.True {
		t.Fatal("node drained or granted before its before-reboot hook said true")
	}
	annotate(t, sn.Name, map[string]*string{before: ptr("false")})
	settled(t, sn.Name)
	if getNode(t, sn.Name).Spec.Unschedulable {
		t.Fatal("a hook annotation of \"false\" must keep holding")
	}
	annotate(t, sn.Name, map[string]*string{before: ptr(protocol.True)})
	n = waitNode(t, sn.Name, 30*time.Second, "after-reboot label", func(n *corev1.Node) bool { return n.Labels[protocol.AfterReboot] == protocol.True })
	if sn.Boots() != 1 {
		t.Fatalf("after-reboot label before the reboot (boots=%d)", sn.Boots())
	}
	if _, ok := n.Annotations[before]; ok {
		t.Error("before-reboot hook annotation must be cleared for the next cycle")
	}
	settled(t, sn.Name)
	if n := getNode(t, sn.Name); n.Annotations[protocol.RebootOK] != protocol.True || !n.Spec.Unschedulable {
		t.Fatal("cycle finished before the after-reboot hook said true")
	}
	annotate(t, sn.Name, map[string]*string{after: ptr(protocol.True)})
	n = waitNode(t, sn.Name, 30*time.Second, "cycle finished", finished)
	if _, ok := n.Annotations[after]; ok {
		t.Error("after-reboot hook annotation must be cleared for the next cycle")
	}
	if n.Spec.Unschedulable {
		t.Error("left cordoned")
	}
}

// Outside the reboot window nothing new starts; an operator started inside it (same cluster state)
// carries on.
func TestRebootWindow(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	nodes := simNodes(t, "window", 1)
	sn := nodes[0]
	closed := time.Date(2026, 11, 19, 9, 0, 0, 0, time.UTC) // a Thursday, 09:00
	thu := func(s *policy.Spec) {
		s.FLUOWindow = policy.FLUOWindow{Start: "Thu 14:00", Length: "1h", TimeZone: "UTC"}
	}
	stop := startOperator(t, opOptions{now: func() time.Time { return closed }, spec: thu})
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	// The operator looked and holds it: blocked-by says the window is closed.
	n := blockedBy(t, sn.Name, "window")
	if n.Spec.Unschedulable || n.Annotations[protocol.DrainStarted] != "" || n.Annotations[protocol.RebootOK] == protocol.True {
		t.Fatalf("a cycle started outside the window: %v", n.Annotations)
	}
	stop()
	open := time.Date(2026, 11, 19, 14, 30, 0, 0, time.UTC)
	startOperator(t, opOptions{now: func() time.Time { return open }, spec: thu})
	waitNode(t, sn.Name, 30*time.Second, "cycle finished inside the window", finished)
}

// A node the admin cordoned stays cordoned after its cycle; Slipway records no cordon of its own.
func TestAdminCordonStays(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	nodes := simNodes(t, "admin", 1)
	sn := nodes[0]
	kubectl(t, "cordon", sn.Name)
	startOperator(t, opOptions{})
	if err := sn.SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	n := waitNode(t, sn.Name, 30*time.Second, "cycle finished", finished)
	if !n.Spec.Unschedulable {
		t.Error("the admin's cordon was lifted")
	}
	if sn.Boots() != 1 {
		t.Errorf("boots = %d, want 1", sn.Boots())
	}
}

// Garbage in the protocol annotations changes nothing: no cordon, no grant, a warning Event.
func TestMalformedAnnotationsChangeNothing(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	if _, err := testenv.CreateNode(context.Background(), client, "garbage-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	startOperator(t, opOptions{})
	annotate(t, "garbage-0", map[string]*string{protocol.RebootNeeded: ptr("yes"), protocol.RebootPaused: ptr("perhaps"), protocol.RebootOK: ptr("maybe")})
	deadline := time.Now().Add(15 * time.Second)
	for events(t, "garbage-0", "MalformedAnnotation") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no MalformedAnnotation event")
		}
		time.Sleep(100 * time.Millisecond)
	}
	settled(t, "garbage-0") // that sync has ended, and whatever it did is written
	n := getNode(t, "garbage-0")
	if n.Spec.Unschedulable || n.Annotations[protocol.RebootOK] != "maybe" || n.Annotations[protocol.DrainStarted] != "" {
		t.Fatalf("malformed input changed the node: unschedulable=%v %v", n.Spec.Unschedulable, n.Annotations)
	}
	// The node deleted and created again under its name with the same garbage is a new node: it is
	// warned about again (the operator forgot the old one rather than keeping it forever).
	if err := client.CoreV1().Nodes().Delete(context.Background(), "garbage-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "garbage-0", Annotations: map[string]string{
		protocol.RebootNeeded: "yes", protocol.RebootPaused: "perhaps", protocol.RebootOK: "maybe"}}}
	created, err := client.CoreV1().Nodes().Create(context.Background(), again, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	warned := func() bool {
		l, err := client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=garbage-0,reason=MalformedAnnotation"})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Items {
			if e.InvolvedObject.UID == created.UID {
				return true
			}
		}
		return false
	}
	for !warned() {
		if time.Now().After(deadline.Add(15 * time.Second)) {
			t.Fatal("the node created again was not warned about")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FLUO's README test on a node running Slipway's real agent: the whole cycle, with a reboot.
func TestFLUOReadmeAnnotateWithSlipwayAgent(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	sn := simNodes(t, "readme", 1)[0]
	startOperator(t, opOptions{})
	kubectl(t, "annotate", "node", sn.Name, "--overwrite", "flatcar-linux-update.v1.flatcar-linux.net/reboot-needed=true")
	waitNode(t, sn.Name, 30*time.Second, "cycle finished", finished)
	if sn.Boots() != 1 {
		t.Errorf("boots = %d, want 1: the annotated reboot did not happen", sn.Boots())
	}
	if events(t, sn.Name, "CycleAborted") != 0 {
		t.Error("the cycle was aborted")
	}
}
