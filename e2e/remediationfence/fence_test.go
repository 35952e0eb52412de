package remediationfence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	medik8s "github.com/medik8s/common/pkg/lease"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator/remediation"
)

var shared = &testenv.Shared{Name: "remediationfence"}

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

// nhcHolder is the holder identity NodeHealthCheck's controller gives medik8s' lease manager.
const nhcHolder = "NodeHealthCheck"

// machineCRD installs Cluster API's own Machine CRD from the module this test builds against.
func machineCRD(t *testing.T, cp *testenv.ControlPlane) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-json", "sigs.k8s.io/cluster-api").Output()
	var m struct{ Dir string }
	if err != nil || json.Unmarshal(out, &m) != nil || m.Dir == "" {
		t.Fatalf("go list -m sigs.k8s.io/cluster-api: %v %s (go mod download in e2e/ fetches it)", err, out)
	}
	if err := testenv.InstallCRDFiles(context.Background(), cp.RestConfig(), filepath.Join(m.Dir, "config", "crd", "bases", "cluster.x-k8s.io_machines.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := testenv.WaitDiscovery(cp.RestConfig(), 30*time.Second, func(d discovery.DiscoveryInterface) error {
		_, err := remediation.MachinesResource(d)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// The fence as the remediators' own code sees it, held by the real operator binary across a SIGKILL:
//   - while NodeHealthCheck holds a node's lease (taken with medik8s' own manager), Slipway does not
//     start that node's cycle;
//   - from a node's admission, medik8s' manager refuses NodeHealthCheck the node's lease
//     (AlreadyHeldError) and Cluster API's HasSkipRemediation is true for its Machine;
//   - the operator is SIGKILLed mid-cycle; the next one keeps both (it renews the lease at the next
//     stage) and removes both when the node is verified back: then medik8s' manager gives
//     NodeHealthCheck the lease and HasSkipRemediation is false.
func TestFenceAsTheRemediatorsSeeItAcrossSIGKILL(t *testing.T) {
	testenv.NeedRealParts(t, "a control plane, dbus-daemon and go build of update-operator")
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Skip("dbus-daemon not installed (make deps)")
	}
	cp := shared.Need(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := cp.Client()
	bin, err := operatorproc.Build(ctx, filepath.Join(t.TempDir(), "bin"), "")
	if err != nil {
		t.Fatal(err)
	}
	machineCRD(t, cp)
	for _, ns := range []string{remediation.DefaultLeaseNamespace, "capi", "slipway-fence"} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := clusterv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cr, err := crclient.New(cp.RestConfig(), crclient.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	logrus.SetOutput(io.Discard) // medik8s' manager logs every call through logrus' global logger
	nhc, err := medik8s.NewManagerWithCustomLogger(cr, nhcHolder, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}

	const hold = "example.com/fence-hold" // a before-reboot hook: a node stays in its cycle until it is set
	var nodes []*simnode.Node
	for i := 0; i < 2; i++ {
		sn, err := simnode.New(ctx, fmt.Sprintf("fence-%d", i), simnode.Options{Client: c, Dir: t.TempDir(), Log: klog.Background(), RebootDelay: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sn.Stop)
		nodes = append(nodes, sn)
		m := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m%d", i), Namespace: "capi"},
			Spec: clusterv1.MachineSpec{ClusterName: "workload", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr("boot")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine", Name: fmt.Sprintf("m%d", i)}},
		}
		if err := cr.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: sn.Name}
		if err := cr.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
		// What Cluster API writes on each Node it backs.
		patch(t, c, sn.Name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			remediation.MachineOfNode: m.Name, remediation.ClusterNamespaceOfNode: "capi"}}})
	}
	var boots []string // each node's boot before its cycle
	for _, sn := range nodes {
		boots = append(boots, sn.BootID())
		testenv.MustWaitNode(t, c, sn.Name, 20*time.Second, "agent reports", func(n *corev1.Node) bool {
			return n.Annotations[protocol.BootID] == sn.BootID() && n.Annotations[protocol.Status] != ""
		})
	}
	node := func(name string) *corev1.Node {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// nhcMay asks medik8s' own lease manager, as NodeHealthCheck does before it remediates: nil when it
	// may (it then holds the lease), an AlreadyHeldError when someone else holds it.
	nhcMay := func(name string) error {
		return nhc.RequestLease(ctx, node(name), 10*time.Minute)
	}
	mhcSkips := func(machine string) bool {
		var m clusterv1.Machine
		if err := cr.Get(ctx, crclient.ObjectKey{Namespace: "capi", Name: machine}, &m); err != nil {
			t.Fatal(err)
		}
		return annotations.HasSkipRemediation(&m)
	}

	// NodeHealthCheck is remediating fence-1 before any update: its lease is NodeHealthCheck's.
	if err := nhcMay("fence-1"); err != nil {
		t.Fatalf("NodeHealthCheck could not take fence-1's lease before any cycle: %v", err)
	}
	op := func(id string) *operatorproc.Proc {
		return operatorproc.StartT(t, bin.Path, []string{
			"--kubeconfig=" + cp.Kubeconfig, "--namespace=slipway-fence", "--identity=" + id,
			"--lease-duration=4s", "--renew-deadline=3s", "--retry-period=500ms", "--http-address=127.0.0.1:0",
			"--max-unavailable=2", "--before-reboot-annotations=" + hold, "--reboot-timeout=30m",
			"--remediation-lease-namespace=" + remediation.DefaultLeaseNamespace,
			"--remediation-machines-kubeconfig=" + cp.Kubeconfig, "--remediation-machines-namespace=capi",
		}, id)
	}
	first := op("op-a")
	for _, sn := range nodes {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	inCycle := func(n *corev1.Node) bool { return n.Labels[protocol.BeforeReboot] == protocol.True }
	testenv.MustWaitNode(t, c, "fence-0", 60*time.Second, "admitted, waiting for its hook", inCycle)
	testenv.MustWaitNode(t, c, "fence-1", 30*time.Second, "held while NodeHealthCheck remediates it", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "remediation: ")
	})
	if n := node("fence-1"); n.Spec.Unschedulable || n.Annotations[protocol.CycleStarted] != "" {
		t.Errorf("fence-1 started its cycle while NodeHealthCheck holds its lease: %v", n.Annotations)
	}
	var held medik8s.AlreadyHeldError
	if err := nhcMay("fence-0"); !errors.As(err, &held) {
		t.Errorf("fence-0 in its cycle: medik8s' lease manager answered NodeHealthCheck %v, want AlreadyHeldError", err)
	}
	if !mhcSkips("m0") {
		t.Error("fence-0 in its cycle: Cluster API's HasSkipRemediation is false for its Machine m0")
	}
	if mhcSkips("m1") {
		t.Error("fence-1 not in its cycle: its Machine m1 carries skip-remediation")
	}

	// SIGKILL mid-cycle; the next operator takes over once the leader lease lapses.
	first.Kill()
	killed := time.Now()
	op("op-b")
	// NodeHealthCheck is done with fence-1: it gives the lease back (medik8s' own InvalidateLease).
	if err := nhc.InvalidateLease(ctx, node("fence-1")); err != nil {
		t.Fatal(err)
	}
	patch(t, c, "fence-1", map[string]any{"metadata": map[string]any{"annotations": map[string]any{"example.com/poke": "1"}}})
	testenv.MustWaitNode(t, c, "fence-1", 60*time.Second, "admitted by the new operator once NodeHealthCheck let go", inCycle)
	// The new operator renews fence-0's lease at its next stage (the grant after the hook), never removes it.
	patch(t, c, "fence-0", map[string]any{"metadata": map[string]any{"annotations": map[string]any{hold: protocol.True}}})
	testenv.MustWaitNode(t, c, "fence-0", 60*time.Second, "granted its reboot by the new operator", func(n *corev1.Node) bool {
		return n.Annotations[protocol.RebootOK] == protocol.True || n.Annotations[protocol.BootID] != boots[0]
	})
	l, err := c.CoordinationV1().Leases(remediation.DefaultLeaseNamespace).Get(ctx, "node-fence-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("fence-0 after the kill: %v", err)
	}
	if h := deref(l.Spec.HolderIdentity); h != remediation.Holder || l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(killed) {
		t.Errorf("fence-0 after the kill: lease holder %q renewed %v, want Slipway's, renewed by the operator after the kill at %s", h, l.Spec.RenewTime, killed)
	}
	for _, name := range []string{"fence-0", "fence-1"} {
		if err := nhcMay(name); !errors.As(err, &held) {
			t.Errorf("%s in its cycle under the new operator: medik8s answered NodeHealthCheck %v, want AlreadyHeldError", name, err)
		}
	}
	for _, m := range []string{"m0", "m1"} {
		if !mhcSkips(m) {
			t.Errorf("%s's node in its cycle under the new operator: HasSkipRemediation is false", m)
		}
	}
	patch(t, c, "fence-1", map[string]any{"metadata": map[string]any{"annotations": map[string]any{hold: protocol.True}}})
	for i, sn := range nodes {
		testenv.MustWaitNode(t, c, sn.Name, 90*time.Second, "cycle finished", func(n *corev1.Node) bool {
			a := n.Annotations
			_, cordonMark := a[protocol.Cordoned]
			return a[protocol.BootID] != boots[i] && a[protocol.LastRebootTime] != "" && !cordonMark &&
				a[protocol.RebootOK] == protocol.False && a[protocol.RebootNeeded] == protocol.False && a[protocol.RebootInProgress] == protocol.False
		})
	}
	// Verified back: the fence is gone, as medik8s' and Cluster API's code see it.
	for i, name := range []string{"fence-0", "fence-1"} {
		m := fmt.Sprintf("m%d", i)
		testenv.MustWaitNode(t, c, name, 20*time.Second, "its fence removed", func(*corev1.Node) bool {
			_, err := c.CoordinationV1().Leases(remediation.DefaultLeaseNamespace).Get(ctx, "node-"+name, metav1.GetOptions{})
			return apierrors.IsNotFound(err) && !mhcSkips(m)
		})
		if err := nhcMay(name); err != nil {
			t.Errorf("%s verified back: medik8s' lease manager refused NodeHealthCheck: %v", name, err)
		}
		if err := nhc.InvalidateLease(ctx, node(name)); err != nil {
			t.Error(err)
		}
	}
}

func patch(t *testing.T, c kubernetes.Interface, node string, body map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
