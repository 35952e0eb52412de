package fleetlock

import (
	"context"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/protocol"
)

func enrolledNode(name, machineID string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{protocol.FleetLockEnrolled: protocol.True}},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{MachineID: machineID}},
	}
}

func post(t *testing.T, base, op, id string) (int, string) {
	t.Helper()
	status, kind, err := Ask(context.Background(), base, op, id, "default")
	if err != nil {
		t.Fatal(err)
	}
	return status, kind
}

// The per-node server answers for its own Node only. The fake clientset ignores the informer's field
// selector and lists every Node, which is the point: even an informer that holds another enrolled,
// agentless Node never lets a request for that Node's id write anything.
func TestServeNodeAnswersOnlyForItsNode(t *testing.T) {
	const ownMachine, otherMachine = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	client := fake.NewSimpleClientset(enrolledNode("fcos-a", ownMachine), enrolledNode("fcos-b", otherMachine))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := ServeNode(ctx, "127.0.0.1:0", client, "fcos-a", "", klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr.String()
	own, _ := NodeID(ownMachine)
	other, _ := NodeID(otherMachine)
	client.ClearActions()

	for _, op := range []string{"pre-reboot", "steady-state"} {
		if status, kind := post(t, base, op, other); status != http.StatusForbidden || kind != KindNotThisNode {
			t.Errorf("%s for another node's id: %d %s, want 403 %s", op, status, kind, KindNotThisNode)
		}
	}
	if status, kind := post(t, base, "pre-reboot", "00000000000040008000000000000000"); status != http.StatusForbidden || kind != KindNotThisNode {
		t.Errorf("pre-reboot for an unknown id: %d %s, want 403 %s", status, kind, KindNotThisNode)
	}
	if acts := client.Actions(); len(acts) != 0 {
		t.Fatalf("requests for other ids reached the API server: %v", acts)
	}
	// Its own id: asked (409 reboot_pending), written on its own Node.
	if status, kind := post(t, base, "pre-reboot", own); status != http.StatusConflict || kind != KindWaiting {
		t.Fatalf("pre-reboot for its own id: %d %s, want 409 %s", status, kind, KindWaiting)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" && a.(interface{ GetName() string }).GetName() != "fcos-a" {
			t.Errorf("patched %s", a.(interface{ GetName() string }).GetName())
		}
	}
	n, _ := client.CoreV1().Nodes().Get(ctx, "fcos-a", metav1.GetOptions{})
	if n.Annotations[protocol.RebootNeeded] != protocol.True || n.Annotations[protocol.FleetLockID] != own {
		t.Errorf("own node after its ask: %v", n.Annotations)
	}
	if b, _ := client.CoreV1().Nodes().Get(ctx, "fcos-b", metav1.GetOptions{}); len(b.Annotations) != 0 {
		t.Errorf("the other node was written: %v", b.Annotations)
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz: %d", resp.StatusCode)
	}
}

// The per-node server refuses to listen anywhere but loopback, and to start without its node.
func TestServeNodeRefusesNonLoopback(t *testing.T) {
	client := fake.NewSimpleClientset()
	for _, addr := range []string{":495", "0.0.0.0:495", "10.0.0.5:495", "[::]:495", "localhost:495", "127.0.0.1"} {
		if _, err := ServeNode(context.Background(), addr, client, "fcos-a", "", klog.Background()); err == nil || !strings.Contains(err.Error(), "loopback") && !strings.Contains(err.Error(), "127.0.0.1:PORT") {
			t.Errorf("ServeNode on %q: %v, want a refusal naming loopback", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "127.0.0.2:0"} {
		if err := LoopbackOnly(addr); err != nil {
			t.Errorf("LoopbackOnly(%q): %v", addr, err)
		}
	}
	if _, err := ServeNode(context.Background(), "127.0.0.1:0", client, "", "", klog.Background()); err == nil {
		t.Error("ServeNode without a node name started")
	}
	if acts := client.Actions(); len(acts) != 0 {
		t.Errorf("a refused server talked to the API server: %v", acts)
	}
}
