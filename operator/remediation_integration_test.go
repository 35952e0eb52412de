package operator_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	kptr "k8s.io/utils/ptr"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/remediation"
)

// capiModule is the Cluster API release whose Machine CRD the fence is proven against.
const capiModule = "sigs.k8s.io/cluster-api@v1.11.0"

// installMachineCRD installs Cluster API's own Machine CRD, from its module (go mod download through the
// module proxy), or skips t when the proxy does not serve it.
func installMachineCRD(t *testing.T) schema.GroupVersionResource {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", capiModule).Output()
	var m struct{ Dir, Error string }
	if json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Skipf("%s is not in the module cache and the module proxy did not serve it (%v %s): Cluster API's Machine CRD is read from its module", capiModule, err, m.Error)
	}
	if err := testenv.InstallCRDFiles(context.Background(), cp.RestConfig(), filepath.Join(m.Dir, "config", "crd", "bases", "cluster.x-k8s.io_machines.yaml")); err != nil {
		t.Fatal(err)
	}
	var res schema.GroupVersionResource
	if err := testenv.WaitDiscovery(cp.RestConfig(), 30*time.Second, func(d discovery.DiscoveryInterface) (err error) {
		res, err = remediation.MachinesResource(d)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return res
}

// machine creates a v1beta2 Machine in namespace capi backing node (status.nodeRef), with annotations.
func machine(t *testing.T, dyn dynamic.Interface, res schema.GroupVersionResource, name, node string, annotations map[string]any) {
	t.Helper()
	ctx := context.Background()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": res.Group + "/" + res.Version, "kind": "Machine",
		"metadata": map[string]any{"name": name, "namespace": "capi", "annotations": annotations},
		"spec": map[string]any{"clusterName": "workload", "bootstrap": map[string]any{"dataSecretName": "boot"},
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": name}},
	}}
	created, err := dyn.Resource(res).Namespace("capi").Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(created.Object, node, "status", "nodeRef", "name"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(res).Namespace("capi").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func machineAnnotations(t *testing.T, dyn dynamic.Interface, res schema.GroupVersionResource, name string) map[string]string {
	t.Helper()
	m, err := dyn.Resource(res).Namespace("capi").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m.GetAnnotations()
}

func nodeLease(t *testing.T, node string) *coordinationv1.Lease {
	t.Helper()
	l, err := client.CoordinationV1().Leases(remediation.DefaultLeaseNamespace).Get(context.Background(), "node-"+node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The remediation fence on a real API server, with Cluster API's own Machine CRD: from a node's
// admission until it is verified back, medik8s' Lease node-<name> is Slipway's and valid and the
// node's Machine carries cluster.x-k8s.io/skip-remediation; after the cycle both are gone. A lease
// another holder keeps valid holds the admission (that controller is remediating the node) and is
// taken over once it lapsed; a skip-remediation a person set stays; a Node that names a Machine backing
// another node does not steer the fence to it. What an operator stopped mid-cycle left is removed by
// the next one: at its start for a node no longer in its cycle, when the cycle ends for one still in it.
func TestRemediationFence(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	res := installMachineCRD(t)
	dyn, err := dynamic.NewForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{remediation.DefaultLeaseNamespace, "capi"} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	const hold = "example.com/fence-hold" // a before-reboot hook: the node stays in its cycle until it is set
	sns := simNodes(t, "fence", 3)
	machine(t, dyn, res, "m0", "fence-0", nil)
	machine(t, dyn, res, "m1", "fence-1", map[string]any{remediation.SkipRemediation: "", "owner": "a person"})
	machine(t, dyn, res, "m2", "someone-else", nil)
	// Another workload cluster's Slipway, managed from the same management cluster, holds m3 for its own
	// node fence-1: no sweep of this cluster's touches it.
	machine(t, dyn, res, "m3", "fence-1", map[string]any{remediation.SkipRemediation: "", remediation.SkipRemediationBy: "other-cluster/fence-1"})
	for i, m := range []string{"m0", "m1", "m2"} {
		annotate(t, sns[i].Name, map[string]*string{remediation.MachineOfNode: kptr.To(m), remediation.ClusterNamespaceOfNode: kptr.To("capi")})
	}
	// NodeHealthCheck holds fence-2's lease: it is remediating that node.
	theirs := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-fence-2", Namespace: remediation.DefaultLeaseNamespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: kptr.To("NodeHealthCheck"), LeaseDurationSeconds: kptr.To(int32(3600)), RenewTime: kptr.To(metav1.NowMicro())}}
	if _, err := client.CoordinationV1().Leases(remediation.DefaultLeaseNamespace).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := func(tap *testenv.LogTap) context.CancelFunc {
		keeper, err := remediation.NewKeeper([]remediation.Fence{
			&remediation.Lease{Client: client, Namespace: remediation.DefaultLeaseNamespace, Now: time.Now},
			&remediation.Machine{Client: dyn, Resource: res, Cluster: "this-cluster", Namespace: "capi"},
		}, 30*time.Minute, nil, tap.Logger(klog.Background()), time.Now, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		return startOperator(t, opOptions{max: "3", before: []string{hold}, rebootTimeout: 30 * time.Minute, tap: tap,
			tweak: func(c *operator.Config) { c.Remediation, c.Blockers = keeper, append(c.Blockers, keeper.Blocker()) }})
	}
	var tap testenv.LogTap
	stop := start(&tap)
	for _, sn := range sns {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	inCycle := func(n *corev1.Node) bool { return n.Labels[protocol.BeforeReboot] == protocol.True }
	for _, name := range []string{"fence-0", "fence-1"} {
		waitNode(t, name, 30*time.Second, "admitted, waiting for its hook", inCycle)
		l := nodeLease(t, name)
		if l == nil || kptr.Deref(l.Spec.HolderIdentity, "") != remediation.Holder || l.Spec.RenewTime == nil ||
			!l.Spec.RenewTime.Add(time.Duration(kptr.Deref(l.Spec.LeaseDurationSeconds, 0))*time.Second).After(time.Now().Add(30*time.Minute)) {
			t.Errorf("%s in its cycle: lease %+v, want Slipway's, valid for --reboot-timeout and more", name, l)
		}
	}
	if a := machineAnnotations(t, dyn, res, "m0"); a[remediation.SkipRemediationBy] != "this-cluster/fence-0" {
		t.Errorf("m0 (fence-0's Machine) during the cycle: %v, want skip-remediation set by Slipway", a)
	} else if _, ok := a[remediation.SkipRemediation]; !ok {
		t.Errorf("m0: no %s", remediation.SkipRemediation)
	}
	if a := machineAnnotations(t, dyn, res, "m1"); a[remediation.SkipRemediationBy] != "" {
		t.Errorf("m1 (a person's skip-remediation): Slipway marked it %v", a)
	}
	// fence-2: NodeHealthCheck's lease holds it out of its cycle; its Machine (backing another node) is untouched.
	n := waitNode(t, "fence-2", 30*time.Second, "held by the remediation blocker", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "remediation: medik8s lease medik8s-leases/node-fence-2 held by \"NodeHealthCheck\"")
	})
	if n.Spec.Unschedulable || n.Annotations[protocol.CycleStarted] != "" {
		t.Errorf("fence-2 admitted while NodeHealthCheck holds its lease: %v", n.Annotations)
	}
	if l := nodeLease(t, "fence-2"); kptr.Deref(l.Spec.HolderIdentity, "") != "NodeHealthCheck" {
		t.Errorf("fence-2's lease taken from its holder: %+v", l.Spec)
	}
	// Their lease lapses: Slipway takes it over and fence-2 starts, but m2 backs another node.
	theirs = nodeLease(t, "fence-2")
	theirs.Spec.RenewTime = kptr.To(metav1.NewMicroTime(time.Now().Add(-2 * time.Hour)))
	if _, err := client.CoordinationV1().Leases(remediation.DefaultLeaseNamespace).Update(ctx, theirs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	annotate(t, "fence-2", map[string]*string{"example.com/poke": kptr.To("1")}) // a sync of fence-2 now, not at its backoff
	waitNode(t, "fence-2", 60*time.Second, "admitted once the lease lapsed", inCycle)
	if l := nodeLease(t, "fence-2"); kptr.Deref(l.Spec.HolderIdentity, "") != remediation.Holder || kptr.Deref(l.Spec.LeaseTransitions, 0) != 1 {
		t.Errorf("fence-2's lapsed lease: %+v, want taken over (holder Slipway, one transition)", l.Spec)
	}
	if a := machineAnnotations(t, dyn, res, "m2"); len(a) != 0 {
		t.Errorf("m2 backs another node, but was annotated %v", a)
	}

	// The operator stops mid-cycle (nothing runs at its end: as a SIGKILL leaves things). fence-1 is
	// taken out of its cycle by hand meanwhile, and paused so it is not admitted again; fence-0 stays
	// in its cycle.
	stop()
	out := `{"metadata":{"labels":{"` + protocol.BeforeReboot + `":null},"annotations":{"` + protocol.RebootPaused + `":"true","` + protocol.CycleStarted + `":null}}}`
	if _, err := client.CoreV1().Nodes().Patch(ctx, "fence-1", types.MergePatchType, []byte(out), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	tap2 := testenv.LogTap{}
	start(&tap2)
	tap2.Wait(t, 0, 30*time.Second, "the new operator removes what the stopped one left for fence-1", func(l testenv.LogLine) bool {
		return l.Msg == "removed a remediation fence an earlier operator left" && l.Values["node"] == "fence-1" && l.Values["fence"] == "nhc-lease"
	})
	if nodeLease(t, "fence-1") != nil {
		t.Error("fence-1 out of its cycle: its lease is still there")
	}
	if nodeLease(t, "fence-0") == nil {
		t.Error("fence-0 still in its cycle: the new operator removed its lease")
	}
	// fence-0 and fence-2 finish their cycles: every fence is gone, a person's skip-remediation stays.
	for _, name := range []string{"fence-0", "fence-2"} {
		annotate(t, name, map[string]*string{hold: kptr.To(protocol.True)})
	}
	for _, name := range []string{"fence-0", "fence-2"} {
		waitNode(t, name, 60*time.Second, "cycle finished", finished)
	}
	for _, name := range []string{"fence-0", "fence-1", "fence-2"} {
		testenv.MustWaitNode(t, client, name, 10*time.Second, "its lease removed", func(*corev1.Node) bool { return nodeLease(t, name) == nil })
	}
	a := machineAnnotations(t, dyn, res, "m0")
	if _, still := a[remediation.SkipRemediation]; still || a[remediation.SkipRemediationBy] != "" {
		t.Errorf("m0 after the cycle: %v, want Slipway's skip-remediation removed", a)
	}
	if a := machineAnnotations(t, dyn, res, "m3"); a[remediation.SkipRemediationBy] != "other-cluster/fence-1" {
		t.Errorf("m3, another cluster's mark: %v", a)
	}
	if a := machineAnnotations(t, dyn, res, "m1"); a["owner"] != "a person" {
		t.Errorf("m1: %v", a)
	} else if _, ok := a[remediation.SkipRemediation]; !ok {
		t.Errorf("m1: the person's skip-remediation was removed: %v", a)
	}
}
