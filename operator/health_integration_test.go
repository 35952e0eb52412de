package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/health"
)

// Health gates on the real API server: a Deployment short of replicas and a custom resource (a
// CephCluster CRD) whose status is missing, then not HEALTH_OK, hold the waiting node with the exact
// reason; when both hold, it is admitted.
func TestHealthChecks(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"shop", "rook-ceph"} {
		_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	}
	// The Deployment (no controller runs: the test writes its status).
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}
	d, err = client.AppsV1().Deployments("shop").Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.AppsV1().Deployments("shop").Delete(ctx, "web", metav1.DeleteOptions{}) })
	d.Status.AvailableReplicas, d.Status.ReadyReplicas, d.Status.Replicas = 2, 2, 3
	if d, err = client.AppsV1().Deployments("shop").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The CRD and its object, without a status yet.
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "cephclusters.ceph.rook.io"},
		"spec": map[string]any{"group": "ceph.rook.io", "scope": "Namespaced",
			"names": map[string]any{"plural": "cephclusters", "singular": "cephcluster", "kind": "CephCluster"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}},
	}}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dyn.Resource(crdGVR).Delete(ctx, "cephclusters.ceph.rook.io", metav1.DeleteOptions{}) })
	ceph := schema.GroupVersionResource{Group: "ceph.rook.io", Version: "v1", Resource: "cephclusters"}
	var cc *unstructured.Unstructured
	deadline := time.Now().Add(30 * time.Second)
	for {
		cc, err = dyn.Resource(ceph).Namespace("rook-ceph").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster", "metadata": map[string]any{"name": "rook-ceph"}}}, metav1.CreateOptions{})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // the CRD is being established
	}
	if err != nil {
		t.Fatal(err)
	}
	var checks []*health.Check
	for _, spec := range []string{
		"deployments.apps/web@shop: object.status.availableReplicas >= object.spec.replicas",
		`cephclusters.ceph.rook.io/rook-ceph@rook-ceph: object.status.ceph.health == "HEALTH_OK"`,
	} {
		c, err := health.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		checks = append(checks, c)
	}
	if _, err := testenv.CreateNode(ctx, client, "healthy-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	startOperator(t, opOptions{tweak: func(c *operator.Config) {
		c.Blockers = append(c.Blockers, &health.Blocker{Checks: checks, Client: dyn,
			Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))})
	}})
	annotate(t, "healthy-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	held := func(what, want string) {
		t.Helper()
		n := waitNode(t, "healthy-0", 30*time.Second, what, func(n *corev1.Node) bool {
			return strings.HasPrefix(n.Annotations[protocol.BlockedBy], string(admission.KindHealth)+": "+want)
		})
		if n.Annotations[protocol.CycleStarted] != "" {
			t.Fatalf("admitted while %s", what)
		}
	}
	held("the Deployment is short", "deployments.apps/web@shop: object.status.availableReplicas >= object.spec.replicas is false")
	d.Status.AvailableReplicas, d.Status.ReadyReplicas = 3, 3
	if _, err := client.AppsV1().Deployments("shop").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	held("the CephCluster has no status", `cephclusters.ceph.rook.io/rook-ceph@rook-ceph: object.status.ceph.health == "HEALTH_OK": evaluation error (no such key)`)
	cc.Object["status"] = map[string]any{"ceph": map[string]any{"health": "HEALTH_WARN"}}
	if cc, err = dyn.Resource(ceph).Namespace("rook-ceph").UpdateStatus(ctx, cc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	held("the CephCluster is HEALTH_WARN", `cephclusters.ceph.rook.io/rook-ceph@rook-ceph: object.status.ceph.health == "HEALTH_OK" is false`)
	cc.Object["status"] = map[string]any{"ceph": map[string]any{"health": "HEALTH_OK"}}
	if _, err = dyn.Resource(ceph).Namespace("rook-ceph").UpdateStatus(ctx, cc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNode(t, "healthy-0", 30*time.Second, "admitted once both hold", func(n *corev1.Node) bool {
		return n.Annotations[protocol.CycleStarted] != "" || n.Annotations[protocol.RebootOK] == protocol.True
	})
}

// A check whose expression errors on a value of the object (here a map lookup keyed by a Secret-like
// value: cel-go names the missing key unquoted) holds the node by the error's kind only; the value is
// in no annotation of the Node and no Event, what every agent and every reader of Nodes and Events
// sees. The operator's debug log alone gets the full error.
func TestHealthCheckErrorShowsNoValue(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const secret = "s3cr3t-db-password"
	dyn, err := dynamic.NewForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gate", Namespace: "tenant"}, Data: map[string]string{"password": secret}}
	if _, err := client.CoreV1().ConfigMaps("tenant").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().ConfigMaps("tenant").Delete(ctx, "gate", metav1.DeleteOptions{}) })
	const expr = `{}[object.data.password] == 'x'`
	check, err := health.Parse("configmaps/gate@tenant: " + expr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.CreateNode(ctx, client, "leaky-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	startOperator(t, opOptions{tweak: func(c *operator.Config) {
		c.Blockers = append(c.Blockers, &health.Blocker{Checks: []*health.Check{check}, Client: dyn,
			Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))})
	}})
	annotate(t, "leaky-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	want := string(admission.KindHealth) + ": configmaps/gate@tenant: " + expr + ": evaluation error (no such key)"
	n := waitNode(t, "leaky-0", 30*time.Second, "held by the erroring check", func(n *corev1.Node) bool {
		return n.Annotations[protocol.BlockedBy] == want
	})
	if !waitEvent(t, "leaky-0", "Blocked") {
		t.Fatal("no Blocked event for the held node")
	}
	for k, v := range n.Annotations {
		if strings.Contains(v, secret) {
			t.Errorf("annotation %s carries the object's value: %q", k, v)
		}
	}
	evs, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, secret) || strings.Contains(e.Reason, secret) {
			t.Errorf("event %s/%s carries the object's value: %q", e.Namespace, e.Name, e.Message)
		}
	}
}
