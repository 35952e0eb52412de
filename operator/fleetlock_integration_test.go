package operator_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/fleetlock"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

var enrolled = map[string]string{protocol.FleetLockEnrolled: protocol.True}

// fleetlockNamespace holds the fleet switch the FleetLock server reads in these tests.
const fleetlockNamespace = "slipway-fleetlock"

func setMachineID(t *testing.T, name, machineID string) {
	t.Helper()
	ctx := context.Background()
	n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.NodeInfo.MachineID = machineID
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startFleetLock serves FleetLock on a free port until the test ends and returns its base URL.
func startFleetLock(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := fleetlock.Serve(ctx, "127.0.0.1:0", client, fleetlockNamespace, klog.Background().WithName("fleetlock"))
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addr.String()
}

var markers atomic.Int64

// fleetlockCaughtUp returns once the FleetLock server at base has seen every Node change made before
// the call, by its own answers: it creates a marker Node with a machine ID of its own and asks for it
// until the server finds it (not_enrolled instead of unknown_node). The server keeps Nodes in one
// informer, fed by one watch in the API server's order, so then it has every earlier change too.
func fleetlockCaughtUp(t *testing.T, base string) {
	t.Helper()
	name := fmt.Sprintf("fl-marker-%d", markers.Add(1))
	machineID := fmt.Sprintf("%032x", 0xfeed0000+markers.Load())
	if _, err := testenv.CreateNode(context.Background(), client, name, "boot-"+name, nil); err != nil {
		t.Fatal(err)
	}
	setMachineID(t, name, machineID)
	id, err := fleetlock.NodeID(machineID)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, kind := zincati(t, base, "pre-reboot", id); kind == fleetlock.KindNotEnrolled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the FleetLock server never saw the marker node")
		}
	}
	if err := client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// zincati posts what Zincati posts and returns the status and error kind.
func zincati(t *testing.T, base, op, id string) (int, string) {
	t.Helper()
	return zincatiIn(t, base, op, id, "default")
}

// zincatiIn is zincati with Zincati's group set to group.
func zincatiIn(t *testing.T, base, op, id, group string) (int, string) {
	t.Helper()
	status, kind, err := fleetlock.Ask(context.Background(), base, op, id, group)
	if err != nil {
		t.Fatal(err)
	}
	return status, kind
}

// A Fedora CoreOS node without an agent reboots through FleetLock: the real operator (on a real API
// server) and the FleetLock server over real HTTP, Zincati's requests played as Zincati sends them.
// pre-reboot asks and is refused until the operator has cordoned, drained and granted; the node
// "reboots" (new boot ID); steady-state lets the operator verify and finish. Agent nodes and unknown
// ids are refused and change nothing.
func TestFleetLockCycle(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const machineID, id = "3d1219c7c4c5404aaa1f6d2a48adfda4", "975228d46dc94622b9bbe16671e2b58d"
	if _, err := testenv.CreateNode(ctx, client, "fcos-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	setMachineID(t, "fcos-0", machineID)
	if _, err := testenv.CreateNode(ctx, client, "agent-0", "boot-x", enrolled); err != nil {
		t.Fatal(err)
	}
	setMachineID(t, "agent-0", "0123456789abcdef0123456789abcdef")
	annotate(t, "agent-0", map[string]*string{protocol.BootID: ptr("boot-x")})
	agentID, _ := fleetlock.NodeID("0123456789abcdef0123456789abcdef")

	startOperator(t, opOptions{})
	base := startFleetLock(t)

	if code, kind := zincati(t, base, "pre-reboot", "ffffffffffffffffffffffffffffffff"); code != 404 || kind != fleetlock.KindUnknownNode {
		t.Errorf("unknown id: %d %s", code, kind)
	}
	// fcos-0 has not opted in yet: refused, unchanged. Then the admin enrolls it.
	if code, kind := zincati(t, base, "pre-reboot", id); code != 403 || kind != fleetlock.KindNotEnrolled {
		t.Errorf("not enrolled: %d %s", code, kind)
	}
	if n := getNode(t, "fcos-0"); n.Annotations[protocol.RebootNeeded] != "" {
		t.Fatal("a request for a node that is not enrolled changed it")
	}
	kubectl(t, "label", "node", "fcos-0", protocol.FleetLockEnrolled+"=true")
	waitFor := func(what string, f func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !f() {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not happen", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// The FleetLock server's informer may not have the agent's boot-id annotation yet.
	waitFor("agent node refused", func() bool {
		code, kind := zincati(t, base, "pre-reboot", agentID)
		return code == 409 && kind == fleetlock.KindAgentNode
	})
	if n := getNode(t, "agent-0"); n.Annotations[protocol.RebootNeeded] != "" {
		t.Fatal("a refused request changed the agent node")
	}

	// 1. Zincati asks: refused for now, but the node now wants a reboot.
	waitFor("first pre-reboot asks", func() bool {
		code, kind := zincati(t, base, "pre-reboot", id)
		return code == 409 && kind == fleetlock.KindWaiting
	})
	n := getNode(t, "fcos-0")
	if n.Annotations[protocol.RebootNeeded] != protocol.True || n.Annotations[protocol.FleetLockID] != id {
		t.Fatalf("pre-reboot did not ask for a reboot: %v", n.Annotations)
	}
	// 2. Zincati retries until the operator has drained and granted.
	waitFor("pre-reboot granted", func() bool { code, _ := zincati(t, base, "pre-reboot", id); return code == 200 })
	n = getNode(t, "fcos-0")
	if n.Annotations[protocol.RebootOK] != protocol.True || !n.Spec.Unschedulable || n.Annotations[protocol.RebootInProgress] != protocol.True {
		t.Fatalf("granted without the operator's cycle: unschedulable=%v %v", n.Spec.Unschedulable, n.Annotations)
	}
	// 3. Before the kubelet reports a new boot, steady-state is not taken for "did not reboot".
	if code, kind := zincati(t, base, "steady-state", id); code != 409 || kind != fleetlock.KindWaiting {
		t.Fatalf("steady-state before the new boot: %d %s", code, kind)
	}
	// 4. The node reboots; Zincati reports steady state; the operator verifies and finishes.
	if _, err := testenv.SetNodeStatus(ctx, client, "fcos-0", "boot-b", true); err != nil {
		t.Fatal(err)
	}
	waitFor("steady-state accepted", func() bool { code, _ := zincati(t, base, "steady-state", id); return code == 200 })
	waitNode(t, "fcos-0", 30*time.Second, "cycle finished", func(n *corev1.Node) bool { return finished(n) && !n.Spec.Unschedulable })
	// 6 (below). Two nodes with one machine ID: neither is acted on. They are enrolled only once the
	// server sees both (until then a request finds one node, not enrolled, and changes nothing).
	defer func() {
		for _, name := range []string{"clone-a", "clone-b"} {
			if _, err := testenv.CreateNode(ctx, client, name, "boot-c", nil); err != nil {
				t.Fatal(err)
			}
			setMachineID(t, name, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
		}
		cloneID, _ := fleetlock.NodeID("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
		refused := func() bool {
			code, kind := zincati(t, base, "pre-reboot", cloneID)
			return code == 409 && kind == fleetlock.KindUnknownNode
		}
		waitFor("cloned machine IDs seen", refused)
		kubectl(t, "label", "node", "clone-a", "clone-b", protocol.FleetLockEnrolled+"=true")
		fleetlockCaughtUp(t, base) // the server has the labels
		if !refused() {
			t.Error("cloned machine IDs not refused once enrolled")
		}
		for _, name := range []string{"clone-a", "clone-b"} {
			if n := getNode(t, name); n.Annotations[protocol.RebootNeeded] != "" {
				t.Errorf("a request for a cloned machine ID changed %s", name)
			}
		}
	}()
	// 5. Idempotent: steady-state again changes nothing.
	before := getNode(t, "fcos-0").ResourceVersion
	if code, _ := zincati(t, base, "steady-state", id); code != 200 {
		t.Fatalf("repeated steady-state: %d", code)
	}
	if after := getNode(t, "fcos-0").ResourceVersion; after != before {
		t.Error("a repeated steady-state wrote to the node")
	}
}

// Zincati that asks and then reports steady state without being granted (it changed its mind, or
// was stopped) withdraws the request: the operator leaves the node alone.
func TestFleetLockWithdrawnWhileWaiting(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const machineID, id = "3d1219c7c4c5404aaa1f6d2a48adfda4", "975228d46dc94622b9bbe16671e2b58d"
	if _, err := testenv.CreateNode(ctx, client, "fcos-1", "boot-a", enrolled); err != nil {
		t.Fatal(err)
	}
	setMachineID(t, "fcos-1", machineID)
	annotate(t, "fcos-1", map[string]*string{protocol.RebootPaused: ptr(protocol.True)}) // the operator will not admit it
	startOperator(t, opOptions{})
	base := startFleetLock(t)
	if code, _ := zincati(t, base, "pre-reboot", id); code != 409 {
		t.Fatalf("pre-reboot on a paused node: %d", code)
	}
	waitNode(t, "fcos-1", 10*time.Second, "reboot requested", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootNeeded] == protocol.True })
	settled(t, "fcos-1") // the operator has seen the paused node ask, and left it alone
	if n := getNode(t, "fcos-1"); n.Spec.Unschedulable || n.Annotations[protocol.RebootOK] == protocol.True {
		t.Fatalf("a paused node was cordoned or granted: %v", n.Annotations)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := zincati(t, base, "steady-state", id)
		n := getNode(t, "fcos-1")
		if code == 200 && n.Annotations[protocol.RebootNeeded] == protocol.False {
			if n.Spec.Unschedulable || n.Annotations[protocol.RebootOK] == protocol.True {
				t.Fatalf("withdrawn request left the node cordoned or granted: %v", n.Annotations)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("steady-state did not withdraw the request: %d %v", code, n.Annotations)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Why 3 for FleetLock: the grant is tied to the boot it was given in. After the reboot (the kubelet
// reports a new boot) a pre-reboot that arrives before the operator cleared reboot-ok is refused,
// changes nothing and never rides on the old grant; a paused node is held even once granted.
func TestFleetLockGrantTiedToBoot(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const machineID = "4d1219c7c4c5404aaa1f6d2a48adfda4"
	id, err := fleetlock.NodeID(machineID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.CreateNode(ctx, client, "fcos-boot", "boot-b", enrolled); err != nil {
		t.Fatal(err)
	}
	setMachineID(t, "fcos-boot", machineID)
	// A grant recorded in boot-a; the node is in boot-b now (no operator runs: nothing clears it).
	annotate(t, "fcos-boot", map[string]*string{protocol.RebootNeeded: ptr(protocol.True), protocol.RebootOK: ptr(protocol.True), protocol.RebootBootID: ptr("boot-a")})
	base := startFleetLock(t)
	fleetlockCaughtUp(t, base) // the server has the grant of boot-a
	if code, _ := zincati(t, base, "pre-reboot", id); code == http.StatusOK {
		t.Fatal("pre-reboot answered 200 on a grant given in an earlier boot: a second reboot")
	}
	if n := getNode(t, "fcos-boot"); n.Annotations[protocol.RebootInProgress] == protocol.True {
		t.Errorf("stale grant marked reboot-in-progress: %v", n.Annotations)
	}
	// Granted in this boot, but paused: held.
	annotate(t, "fcos-boot", map[string]*string{protocol.RebootBootID: ptr("boot-b"), protocol.RebootPaused: ptr("yes")})
	fleetlockCaughtUp(t, base) // the server has the grant of boot-b and the pause
	if code, _ := zincati(t, base, "pre-reboot", id); code == http.StatusOK {
		t.Fatal("pre-reboot answered 200 while reboot-paused was set")
	}
	annotate(t, "fcos-boot", map[string]*string{protocol.RebootPaused: nil})
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := zincati(t, base, "pre-reboot", id)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a grant given in this boot was refused: %d", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := getNode(t, "fcos-boot"); n.Annotations[protocol.RebootInProgress] != protocol.True {
		t.Errorf("granted pre-reboot did not mark reboot-in-progress: %v", n.Annotations)
	}
}

// Issue 11: the FleetLock server honours the fleet switch: an ask while the fleet (or the group
// Zincati asks in) is paused is recorded and answered 409 fleet_paused with the reason, so Zincati's
// log and metrics say why it waits.
func TestFleetLockSaysPaused(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const machineID = "5d1219c7c4c5404aaa1f6d2a48adfda4"
	id, err := fleetlock.NodeID(machineID)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetlockNamespace}}, metav1.CreateOptions{})
	_ = client.CoreV1().ConfigMaps(fleetlockNamespace).Delete(ctx, fleetswitch.ConfigMapName, metav1.DeleteOptions{})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName}, Data: map[string]string{fleetswitch.GroupPausePrefix + "default": "AZ maintenance"}}
	if _, err := client.CoreV1().ConfigMaps(fleetlockNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().ConfigMaps(fleetlockNamespace).Delete(ctx, fleetswitch.ConfigMapName, metav1.DeleteOptions{})
	})
	if _, err := testenv.CreateNode(ctx, client, "fcos-paused", "boot-a", enrolled); err != nil {
		t.Fatal(err)
	}
	setMachineID(t, "fcos-paused", machineID)
	base := startFleetLock(t)
	var code int
	var kind string
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, kind = zincati(t, base, "pre-reboot", id)
		if kind != fleetlock.KindUnknownNode || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != http.StatusConflict || kind != fleetlock.KindPaused {
		t.Errorf("pre-reboot while group default is paused: %d %s, want 409 %s", code, kind, fleetlock.KindPaused)
	}
	n := getNode(t, "fcos-paused")
	if n.Annotations[protocol.RebootNeeded] != protocol.True || n.Annotations[protocol.FleetLockGroup] != "default" {
		t.Errorf("the ask must still be recorded, with its group: %v", n.Annotations)
	}
}

// A node that asked in one group cannot ask in another while it waits or is in its cycle (that would
// escape the first group's pause, and its budget but for the operator's pin): refused, nothing
// written. After steady state it may ask in the new group.
func TestFleetLockGroupHopRefused(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const machineID, id = "3d1219c7c4c5404aaa1f6d2a48adfda4", "975228d46dc94622b9bbe16671e2b58d"
	if _, err := testenv.CreateNode(ctx, client, "hop-0", "boot-a", enrolled); err != nil {
		t.Fatal(err)
	}
	setMachineID(t, "hop-0", machineID)
	base := startFleetLock(t)
	fleetlockCaughtUp(t, base)
	if code, kind := zincatiIn(t, base, "pre-reboot", id, "a"); code != 409 || kind != fleetlock.KindWaiting {
		t.Fatalf("first ask in group a: %d %s", code, kind)
	}
	n := getNode(t, "hop-0")
	if n.Annotations[protocol.FleetLockGroup] != "a" || n.Annotations[protocol.RebootNeeded] != protocol.True {
		t.Fatalf("the ask was not recorded: %v", n.Annotations)
	}
	fleetlockCaughtUp(t, base)
	if code, kind := zincatiIn(t, base, "pre-reboot", id, "b"); code != 409 || kind != fleetlock.KindGroupChanged {
		t.Errorf("ask in group b while waiting in a: %d %s, want 409 %s", code, kind, fleetlock.KindGroupChanged)
	}
	if after := getNode(t, "hop-0"); after.ResourceVersion != n.ResourceVersion {
		t.Errorf("the refused ask wrote to the node: %v", after.Annotations)
	}
	// Steady state withdraws the ask; then the new group is taken.
	if code, kind := zincatiIn(t, base, "steady-state", id, "b"); code != 200 {
		t.Fatalf("steady-state: %d %s", code, kind)
	}
	fleetlockCaughtUp(t, base)
	if code, kind := zincatiIn(t, base, "pre-reboot", id, "b"); code != 409 || kind != fleetlock.KindWaiting {
		t.Fatalf("ask in group b after steady state: %d %s", code, kind)
	}
	if g := getNode(t, "hop-0").Annotations[protocol.FleetLockGroup]; g != "b" {
		t.Errorf("fleetlock-group = %q after a fresh ask in b", g)
	}
}
