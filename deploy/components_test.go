package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/slipway-dev/slipway/operator/health"
)

// overlay writes a user's kustomization: deploy/ as its resource, the component deploy/<component>,
// and config (a local-config ConfigMap the component reads) beside it. It returns the directory.
func overlay(t *testing.T, component, config string) string {
	t.Helper()
	dir := t.TempDir()
	deploy, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, deploy) // kustomize refuses absolute paths
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%q, config.yaml]\ncomponents: [%q]\n",
		rel, filepath.Join(rel, component))
	for name, content := range map[string]string{"config.yaml": config, "kustomization.yaml": k} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// deploy/health-check on a real API server: the operator reads the check the component gives it as
// the object and expression of the ConfigMap, and its ServiceAccount may get exactly that object:
// not another of its kind beside it, not a list.
func TestHealthCheckComponent(t *testing.T) {
	ctx := context.Background()
	cp := controlPlane(t)
	admin := cp.Client()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slipway-health-check\n  annotations: {config.kubernetes.io/local-config: \"true\"}\n" +
		"data:\n  resource: deployments\n  group: apps\n  name: web\n  namespace: shop\n  expression: object.status.availableReplicas >= object.spec.replicas\n"
	all := docs(t, kustomize(t, overlay(t, "health-check", cm)))
	var dep appsv1.Deployment
	decodeDoc(t, all, "Deployment/slipway-update-operator", &dep)
	var flag string
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "UPDATE_OPERATOR_HEALTH_CHECK" {
			flag = e.Value
		}
	}
	check, err := health.Parse(flag)
	if err != nil {
		t.Fatalf("the operator refuses the component's check: %v", err)
	}
	if check.Object() != "deployments.apps/web@shop" || check.Expr != "object.status.availableReplicas >= object.spec.replicas" {
		t.Errorf("the operator reads %s: %s", check.Object(), check.Expr)
	}

	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	decodeDoc(t, all, "Role/slipway-update-operator-health-0", &role)
	decodeDoc(t, all, "RoleBinding/slipway-update-operator-health-0", &binding)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().Roles("shop").Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings("shop").Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	for _, name := range []string{"web", "db"} {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
			Spec: appsv1.DeploymentSpec{Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/c:1"}}}}},
		}
		if _, err := admin.AppsV1().Deployments("shop").Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	op := as(t, cp, "slipway-update-operator")
	if _, err := op.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("the operator may not get the checked object: %v", err)
	}
	if _, err := op.AppsV1().Deployments("shop").Get(ctx, "db", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the operator's get of another Deployment: %v, want forbidden", err)
	}
	if _, err := op.AppsV1().Deployments("shop").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the operator's list of Deployments: %v, want forbidden", err)
	}
}

// deploy/node-prep applies the snippet new nodes get (butane/snippets/flatcar-slipway.ign), byte for
// byte: kustomize reads files only below its directory, so it keeps a copy.
func TestNodePrepConfigIsTheSnippet(t *testing.T) {
	want, err := os.ReadFile("../butane/snippets/flatcar-slipway.ign")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("node-prep/flatcar-slipway.ign")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("deploy/node-prep/flatcar-slipway.ign differs from butane/snippets/flatcar-slipway.ign: run make butane")
	}
}

// deploy/remediation-fence on a real API server: the operator gets --remediation-lease-namespace
// (as its variable) and, through the component's Role, exactly what the fence does with medik8s' node
// leases in medik8s' namespace: create, read, renew, list, remove; nothing in another namespace.
func TestRemediationFenceComponent(t *testing.T) {
	ctx := context.Background()
	cp := controlPlane(t)
	admin := cp.Client()
	all := docs(t, kustomize(t, overlay(t, "remediation-fence", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unused\n  annotations: {config.kubernetes.io/local-config: \"true\"}\n")))
	var dep appsv1.Deployment
	decodeDoc(t, all, "Deployment/slipway-update-operator", &dep)
	found := false
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		found = found || e.Name == "UPDATE_OPERATOR_REMEDIATION_LEASE_NAMESPACE" && e.Value == "medik8s-leases"
	}
	if !found {
		t.Error("the operator does not get UPDATE_OPERATOR_REMEDIATION_LEASE_NAMESPACE=medik8s-leases")
	}
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	decodeDoc(t, all, "Role/slipway-remediation-fence", &role)
	decodeDoc(t, all, "RoleBinding/slipway-remediation-fence", &binding)
	for _, ns := range []string{"medik8s-leases", "elsewhere"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if _, err := admin.RbacV1().Roles("medik8s-leases").Create(ctx, &role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings("medik8s-leases").Create(ctx, &binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	op := as(t, cp, "slipway-update-operator")
	// The API server's RBAC cache takes a moment to see the new binding.
	for deadline := time.Now().Add(30 * time.Second); !can(t, op, "create", "coordination.k8s.io", "leases", "", "medik8s-leases"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the component's RoleBinding never let the operator create a lease in medik8s-leases")
		}
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("slipway-update-operator")}}
	leases := op.CoordinationV1().Leases("medik8s-leases")
	created, err := leases.Create(ctx, lease, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create in medik8s-leases: %v", err)
	}
	created.Spec.LeaseDurationSeconds = ptr.To(int32(60))
	if _, err := leases.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Errorf("renew: %v", err)
	}
	if _, err := leases.List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list: %v", err)
	}
	if w, err := leases.Watch(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("watch: %v", err)
	} else {
		w.Stop()
	}
	if err := leases.Delete(ctx, "node-a", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete: %v", err)
	}
	if _, err := op.CoordinationV1().Leases("elsewhere").Create(ctx, lease, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a lease in another namespace: %v, want forbidden", err)
	}
}
