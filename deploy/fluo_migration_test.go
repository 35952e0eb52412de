package deploy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator/status"
)

// FLUO v0.9.0's example manifests: their namespace and ServiceAccounts.
const (
	fluoNS       = "reboot-coordinator"
	fluoOperator = "flatcar-linux-update-operator-sa"
	fluoAgent    = "flatcar-linux-update-agent"
)

// deploy/fluo-migration/ on a real API server where FLUO's namespace, ServiceAccounts and RBAC (FLUO
// v0.9.0's own manifests) exist: no workload and no namespace of Slipway's; FLUO's operator
// ServiceAccount may do what Slipway's operator does, FLUO's agent ServiceAccount what Slipway's agent
// does and no more (FLUO's cluster-wide pod delete and eviction for it are gone) -- and both are
// confined by Slipway's policies (the agent: its own node, its own keys; the operator: no taints).
func TestFLUOMigrationOverlay(t *testing.T) {
	ctx := context.Background()
	rendered := kustomize(t, "fluo-migration")
	for _, kind := range []string{"Namespace", "Deployment", "DaemonSet", "ServiceAccount", "PodDisruptionBudget"} {
		if strings.Contains(rendered, "\nkind: "+kind+"\n") || strings.HasPrefix(rendered, "kind: "+kind+"\n") {
			t.Errorf("the migration overlay renders a %s: FLUO's own stay in place", kind)
		}
	}
	testenv.NeedRealParts(t, "a control plane (etcd, kube-apiserver)")
	dir := t.TempDir()
	cp, err := testenv.StartControlPlane(ctx, dir, testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	admin := cp.Client()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(stdin string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	// FLUO as its README installs it: all of FLUO v0.9.0's example manifests, from its module
	// (namespace, ServiceAccounts, RBAC, the operator Deployment and the agent DaemonSet).
	fluo := fluoModule(t)
	kubectl("", "apply", "-k", filepath.Join(fluo, "examples", "deploy"))
	if !can(t, asIn(cp, fluoNS, fluoAgent, ""), "delete", "", "pods", "", "default") {
		t.Fatal("FLUO's RBAC is not in place: its agent account cannot delete pods")
	}
	// docs/migrate.md, path A, in its order. 1: FLUO's operator stopped.
	kubectl("", "-n", fluoNS, "scale", "deployment/flatcar-linux-update-operator", "--replicas=0")
	// 2: the pause, before Slipway's operator first runs.
	var out, errOut strings.Builder
	if code := status.Main("kubectl slipway", []string{"pause", "--kubeconfig", cp.Kubeconfig, "-n", fluoNS, "--reason", "migrating"}, &out, &errOut); code != 0 {
		t.Fatalf("kubectl slipway pause: exit %d: %s", code, errOut.String())
	}
	// 3: the overlay (kubectl apply -k deploy/fluo-migration, or the release's fluo-migration.yaml).
	kubectl(rendered, "apply", "-f", "-")
	// 4: both images swapped (the agents' roll and the operator's start need kubelets: not here).
	const image = "registry.example.com/slipway:v0.4.0"
	kubectl("", "-n", fluoNS, "set", "image", "daemonset/flatcar-linux-update-agent", "update-agent="+image)
	kubectl("", "-n", fluoNS, "set", "image", "deployment/flatcar-linux-update-operator", "update-operator="+image)
	kubectl("", "-n", fluoNS, "scale", "deployment/flatcar-linux-update-operator", "--replicas=1")
	if d, err := admin.AppsV1().Deployments(fluoNS).Get(ctx, "flatcar-linux-update-operator", metav1.GetOptions{}); err != nil ||
		d.Spec.Template.Spec.Containers[0].Image != image || *d.Spec.Replicas != 1 {
		t.Fatalf("FLUO's operator Deployment after the swap: %v", err)
	}
	if cm, err := admin.CoreV1().ConfigMaps(fluoNS).Get(ctx, fleetswitch.ConfigMapName, metav1.GetOptions{}); err != nil || !fleetswitch.Read(cm).Paused {
		t.Fatalf("the fleet is not paused when Slipway's operator starts: %v", err)
	}
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := testenv.CreateNode(ctx, admin, n, "boot-"+n, nil); err != nil {
			t.Fatal(err)
		}
	}

	operator := asIn(cp, fluoNS, fluoOperator, "")
	agent := asIn(cp, fluoNS, fluoAgent, "")
	for who, checks := range map[string][]access{
		fluoOperator: {
			{"list", "", "nodes", "", "", true}, {"patch", "", "nodes", "", "", true},
			{"list", "", "pods", "", "", true}, {"create", "", "pods", "eviction", "default", true},
			{"get", "apps", "daemonsets", "", "kube-system", true}, {"create", "", "events", "", "default", true},
			{"create", "coordination.k8s.io", "leases", "", fluoNS, true}, {"create", "", "configmaps", "", fluoNS, true},
			{"delete", "", "nodes", "", "", false}, {"get", "", "secrets", "", fluoNS, false},
			{"update", "coordination.k8s.io", "leases", "", "default", false},
		},
		fluoAgent: {
			{"get", "", "nodes", "", "", true}, {"watch", "", "nodes", "", "", true}, {"patch", "", "nodes", "", "", true},
			{"create", "", "pods", "eviction", "default", false}, {"patch", "", "nodes", "status", "", false},
			{"delete", "", "pods", "", "default", false}, {"list", "", "pods", "", "", false},
			{"update", "coordination.k8s.io", "leases", "", fluoNS, false},
		},
	} {
		checkAccess(t, who, map[string]kubernetes.Interface{fluoOperator: operator, fluoAgent: agent}[who], checks)
	}

	// The policy holds FLUO's agent ServiceAccount: without a node claim nothing; with node-a's, its
	// own reboot-needed but neither reboot-ok nor another node.
	annotate := func(c kubernetes.Interface, node, key string) error {
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: protocol.True}}})
		_, err := c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{})
		return err
	}
	// A new policy is enforced once the API server has compiled it: wait (dry run) until it refuses.
	probe := []byte(`{"metadata":{"annotations":{"` + protocol.Status + `":"probe"}}}`)
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = agent.CoreV1().Nodes().Patch(ctx, "node-b", types.MergePatchType, probe, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), "ValidatingAdmissionPolicy 'slipway-update-agent'"), nil
	}); err != nil {
		t.Fatalf("FLUO's agent patching a node is not refused by the policy after 1m (last answer: %v)", last)
	}
	if err := annotate(agent, "node-a", protocol.RebootNeeded); err == nil || !strings.Contains(err.Error(), "node-name claim") {
		t.Errorf("FLUO's agent without a node claim: %v, want the policy's refusal", err)
	}
	onA := asIn(cp, fluoNS, fluoAgent, "node-a")
	if err := annotate(onA, "node-a", protocol.RebootNeeded); err != nil {
		t.Errorf("FLUO's agent on node-a setting its own reboot-needed: %v", err)
	}
	for _, c := range []struct{ node, key string }{{"node-a", protocol.RebootOK}, {"node-b", protocol.RebootNeeded}} {
		if err := annotate(onA, c.node, c.key); err == nil {
			t.Errorf("FLUO's agent on node-a could set %s on %s", c.key, c.node)
		}
	}
	// FLUO's operator account grants and evicts, and is confined by the operator's policy: no taints.
	if err := annotate(operator, "node-a", protocol.RebootOK); err != nil {
		t.Errorf("FLUO's operator ServiceAccount cannot grant reboot-ok: %v", err)
	}
	taint := []byte(`{"spec":{"taints":[{"key":"example.com/evict","effect":"NoExecute"}]}}`)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = operator.CoreV1().Nodes().Patch(ctx, "node-b", types.MergePatchType, taint, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), "ValidatingAdmissionPolicy 'slipway-update-operator'"), nil
	}); err != nil {
		t.Errorf("FLUO's operator account may taint a node: the operator's policy does not hold it (last answer: %v)", last)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := operator.PolicyV1().Evictions("default").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}); err != nil {
		t.Errorf("FLUO's operator ServiceAccount cannot evict: %v", err)
	}

	// The rollback, in the same spirit: images back, the overlay deleted, then FLUO's RBAC again.
	const fluoImage = "ghcr.io/flatcar/flatcar-linux-update-operator:v0.9.0"
	kubectl("", "-n", fluoNS, "scale", "deployment/flatcar-linux-update-operator", "--replicas=0")
	kubectl("", "-n", fluoNS, "set", "image", "daemonset/flatcar-linux-update-agent", "update-agent="+fluoImage)
	kubectl("", "-n", fluoNS, "set", "image", "deployment/flatcar-linux-update-operator", "update-operator="+fluoImage)
	kubectl(rendered, "delete", "-f", "-")
	kubectl("", "apply", "-k", filepath.Join(fluo, "examples", "deploy", "rbac"))
	kubectl("", "-n", fluoNS, "scale", "deployment/flatcar-linux-update-operator", "--replicas=1")
	if !can(t, agent, "delete", "", "pods", "", "default") {
		t.Error("after the rollback FLUO's agent account cannot delete pods: FLUO's RBAC is not back")
	}
	// Slipway's policies and bindings are gone with the overlay: FLUO's agent is FLUO's again.
	for _, name := range []string{"slipway-update-agent", "slipway-update-operator"} {
		if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after the rollback the binding %s is still there (%v)", name, err)
		}
	}
	if !can(t, agent, "update", "", "nodes", "", "") {
		t.Error("after the rollback FLUO's agent account cannot update Nodes, as FLUO's agent does")
	}
	_ = os.RemoveAll(dir)
}

// fluoModule is FLUO v0.9.0's source from the Go module proxy (its example manifests are what a
// migrating cluster runs). Skips, saying so, where the proxy cannot be reached.
func fluoModule(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/flatcar/flatcar-linux-update-operator@v0.9.0")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); err != nil || jerr != nil || m.Dir == "" {
		t.Skipf("FLUO v0.9.0 from the Go module proxy (for its RBAC manifests) not available: %v %s %s", err, m.Error, out)
	}
	return m.Dir
}
