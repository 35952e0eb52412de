// Package deploy holds the kustomize base; its test renders it with kubectl, applies it to a real
// API server and checks, as each ServiceAccount, that the RBAC allows what the component needs and
// nothing it must not have.
package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/internal/testenv"
)

const ns = "slipway-system"

func as(t *testing.T, cp *testenv.ControlPlane, sa string) kubernetes.Interface {
	t.Helper()
	cfg := cp.RestConfig()
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

func can(t *testing.T, c kubernetes.Interface, verb, group, resource, sub, namespace string) bool {
	t.Helper()
	r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: namespace,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

func TestRenderedRBAC(t *testing.T) {
	ctx := context.Background()
	cp, err := testenv.StartControlPlane(ctx, t.TempDir(), testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(bin, "kubectl")
	rendered, err := exec.Command(kubectl, "kustomize", ".").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/: %v", err)
	}
	for _, want := range []string{"kind: DaemonSet", "kind: Deployment", "image: ghcr.io/slipway-dev/slipway:latest", "/var/run/dbus"} {
		if !strings.Contains(string(rendered), want) {
			t.Errorf("rendered manifests lack %q", want)
		}
	}
	apply := exec.Command(kubectl, "--kubeconfig", cp.Kubeconfig, "apply", "--server-side", "-f", "-")
	apply.Stdin = strings.NewReader(string(rendered))
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	admin := cp.Client()
	if _, err := testenv.CreateNode(ctx, admin, "node-a", "boot-a", nil); err != nil {
		t.Fatal(err)
	}

	agent := as(t, cp, "slipway-update-agent")
	operator := as(t, cp, "slipway-update-operator")
	type check struct {
		verb, group, resource, sub, namespace string
		want                                  bool
	}
	for who, checks := range map[string][]check{
		"slipway-update-agent": {
			{"get", "", "nodes", "", "", true}, {"watch", "", "nodes", "", "", true}, {"patch", "", "nodes", "", "", true},
			{"update", "", "nodes", "status", "", false}, {"delete", "", "nodes", "", "", false},
			{"create", "", "pods", "eviction", "default", false}, {"delete", "", "pods", "", "default", false},
			{"list", "", "secrets", "", ns, false}, {"update", "coordination.k8s.io", "leases", "", ns, false},
		},
		"slipway-update-operator": {
			{"list", "", "nodes", "", "", true}, {"patch", "", "nodes", "", "", true},
			{"list", "", "pods", "", "", true}, {"create", "", "pods", "eviction", "default", true},
			{"get", "apps", "daemonsets", "", "kube-system", true}, {"create", "", "events", "", "default", true},
			{"update", "coordination.k8s.io", "leases", "", ns, true}, {"update", "coordination.k8s.io", "leases", "", "default", false},
			{"delete", "", "pods", "", "default", false}, {"delete", "", "nodes", "", "", false},
			{"get", "", "secrets", "", ns, false}, {"update", "", "nodes", "status", "", false},
		},
	} {
		c := map[string]kubernetes.Interface{"slipway-update-agent": agent, "slipway-update-operator": operator}[who]
		for _, k := range checks {
			if got := can(t, c, k.verb, k.group, k.resource, k.sub, k.namespace); got != k.want {
				t.Errorf("%s %s %s/%s/%s in %q: allowed=%v, want %v", who, k.verb, k.group, k.resource, k.sub, k.namespace, got, k.want)
			}
		}
	}

	// And for real: the agent patches its Node; it cannot evict a pod; the operator can.
	body := []byte(`{"metadata":{"annotations":{"flatcar-linux-update.v1.flatcar-linux.net/reboot-needed":"true"}}}`)
	if _, err := agent.CoreV1().Nodes().Patch(ctx, "node-a", types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Errorf("agent cannot patch its node: %v", err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	if err := agent.PolicyV1().Evictions("default").Evict(ctx, ev); err == nil {
		t.Error("the agent could evict a pod")
	}
	if err := operator.PolicyV1().Evictions("default").Evict(ctx, ev); err != nil {
		t.Errorf("the operator cannot evict a pod: %v", err)
	}
}

// deploy/fleetlock/: the base plus the FleetLock Service and the operator flag. Rendered by kubectl and
// decoded; the Service must reach a port the operator container declares, and the snippet's base_url
// must be the Service's address.
func TestFleetLockOverlay(t *testing.T) {
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := exec.Command(filepath.Join(bin, "kubectl"), "kustomize", "fleetlock").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/fleetlock: %v", err)
	}
	var dep appsv1.Deployment
	var svc corev1.Service
	for _, doc := range strings.Split(string(rendered), "\n---\n") {
		switch {
		case strings.Contains(doc, "kind: Deployment") && strings.Contains(doc, "name: slipway-update-operator"):
			if err := yaml.Unmarshal([]byte(doc), &dep); err != nil {
				t.Fatal(err)
			}
		case strings.Contains(doc, "kind: Service\n") && strings.Contains(doc, "name: slipway-fleetlock"):
			if err := yaml.Unmarshal([]byte(doc), &svc); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 || svc.Name == "" {
		t.Fatalf("rendered overlay lacks the operator Deployment or the Service:\n%s", rendered)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if !strings.Contains(strings.Join(c.Args, " "), "--fleetlock-address=:8081") {
		t.Errorf("operator args %v lack --fleetlock-address", c.Args)
	}
	port := false
	for _, p := range c.Ports {
		port = port || (p.Name == svc.Spec.Ports[0].TargetPort.StrVal && p.ContainerPort == 8081)
	}
	if !port {
		t.Errorf("Service targets %q, which the operator container (%v) does not declare as 8081", svc.Spec.Ports[0].TargetPort.StrVal, c.Ports)
	}
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not select the operator pods", k, v)
		}
	}
	snippet, err := os.ReadFile("../butane/snippets/fcos-fleetlock.bu")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`base_url = "http://%s:%d/"`, svc.Spec.ClusterIP, svc.Spec.Ports[0].Port); !strings.Contains(string(snippet), want) {
		t.Errorf("butane/snippets/fcos-fleetlock.bu does not point Zincati at the Service (%s)", want)
	}
}
