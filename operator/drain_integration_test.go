package operator_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/policy"
)

// A pod no controller manages is not evicted without --force-drain (it would be gone for good), so
// the node is not granted; with --force-drain it is evicted and the cycle goes on.
func TestUnownedPodNeedsForceDrain(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	if _, err := testenv.CreateNode(ctx, client, "bare-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}, metav1.CreateOptions{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lonely", Namespace: "bare"}, Spec: corev1.PodSpec{NodeName: "bare-0", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if _, err := client.CoreV1().Pods("bare").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := startOperator(t, opOptions{})
	annotate(t, "bare-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	n := waitNode(t, "bare-0", 30*time.Second, "drain error", func(n *corev1.Node) bool { return n.Annotations[protocol.DrainError] != "" })
	if !strings.Contains(n.Annotations[protocol.DrainError], "controller") || n.Annotations[protocol.RebootOK] == protocol.True {
		t.Fatalf("drain-error %q, reboot-ok %q", n.Annotations[protocol.DrainError], n.Annotations[protocol.RebootOK])
	}
	stop()
	startOperator(t, opOptions{forceDrain: true})
	waitNode(t, "bare-0", 30*time.Second, "reboot-ok with --force-drain", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	if podsOn(t, "bare-0") != 0 {
		t.Error("unowned pod still on the node")
	}
}

// --drain-failure-policy=force grants reboot-ok after a failed drain (FLUO's behaviour, opt-in).
func TestDrainFailurePolicyForce(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	if _, err := testenv.CreateNode(ctx, client, "forced-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	workload(t, "forced", "db", "forced-0", 1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "forced"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets("forced").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startOperator(t, opOptions{drainTO: time.Second, policy: operator.DrainForce})
	annotate(t, "forced-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "forced-0", 30*time.Second, "reboot-ok despite the PDB", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	if podsOn(t, "forced-0") != 1 {
		t.Error("the PDB-protected pod should still be there: the drain failed and was overridden")
	}
}

// The binary serves /healthz and /metrics, with per-state node counts from its cache.
func TestHTTPEndpoints(t *testing.T) {
	needOperatorBinary(t)
	cleanNodes(t)
	if _, err := testenv.CreateNode(context.Background(), client, "http-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	runOperatorProcess(t, "http", "--leader-elect=false", fmt.Sprintf("--http-address=127.0.0.1:%d", port))
	get := func(path string) (int, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := get("/metrics")
		if code == http.StatusOK && strings.Contains(body, `slipway_operator_nodes{state="idle"} 1`) && strings.Contains(body, "slipway_operator_is_leader 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics: %d\n%s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	// FleetLock is no longer the operator's: the old flag stops the binary at once, saying where it went.
	out, err := exec.Command(bins, "--fleetlock-address=:8081", "--kubeconfig="+cp.Kubeconfig, "--namespace=x").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "update-agent fleetlock") {
		t.Errorf("--fleetlock-address: %v %s, want exit 2 naming update-agent fleetlock", err, out)
	}
}

// A NotReady node's kubelet cannot finish its pods: evicted, they stay Terminating for ever (here: a
// finalizer nobody removes). Its drain takes a pod deleted longer ago than the bound as gone (kubectl
// drain's skip-wait-for-delete) and ends, well before the drain timeout; the pod is still there,
// Terminating. A Ready node would wait for it.
func TestDrainOfNotReadyNodeSkipsPodsStuckTerminating(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	if _, err := testenv.CreateNode(ctx, client, "sick-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.SetNodeStatus(ctx, client, "sick-0", "boot-a", false); err != nil {
		t.Fatal(err)
	}
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sick"}}, metav1.CreateOptions{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: "sick", Finalizers: []string{"example.com/hold"}},
		Spec: corev1.PodSpec{NodeName: "sick-0", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if _, err := client.CoreV1().Pods("sick").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.CoreV1().Pods("sick").Patch(ctx, "stuck", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	start := time.Now()
	startOperator(t, opOptions{forceDrain: true, drainTO: time.Minute, spec: func(s *policy.Spec) { s.Drain.SkipWaitForDelete = metav1.Duration{Duration: time.Second} }})
	annotate(t, "sick-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "sick-0", 45*time.Second, "reboot-ok after a drain that skipped the stuck pod", func(n *corev1.Node) bool {
		return n.Annotations[protocol.RebootOK] == protocol.True
	})
	if took := time.Since(start); took >= time.Minute {
		t.Errorf("granted after %s: the drain waited out its timeout instead of skipping the stuck pod", took)
	}
	p, err := client.CoreV1().Pods("sick").Get(ctx, "stuck", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Errorf("the stuck pod should still be there, Terminating (skipped, not removed): %v %+v", err, p)
	}
}

// kured's --skip-wait-for-delete-timeout holds on Ready nodes too: a pod stuck Terminating on a
// finalizer nobody removes is taken as gone after the bound, and the node is granted well before the
// drain timeout. Without the bound a Ready node waits for it (the NotReady bound does not apply).
func TestSkipWaitForDeleteOnReadyNode(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	if _, err := testenv.CreateNode(ctx, client, "stuckready-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "stuckready"}}, metav1.CreateOptions{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: "stuckready", Finalizers: []string{"example.com/hold"}},
		Spec: corev1.PodSpec{NodeName: "stuckready-0", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if _, err := client.CoreV1().Pods("stuckready").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.CoreV1().Pods("stuckready").Patch(ctx, "stuck", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	// First without kured's bound: the attempt times out (2 s) on the Terminating pod, no grant.
	stop := startOperator(t, opOptions{forceDrain: true, drainTO: 2 * time.Second, spec: func(s *policy.Spec) { s.Drain.SkipWaitForDelete = metav1.Duration{Duration: time.Second} }})
	annotate(t, "stuckready-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	n := waitNode(t, "stuckready-0", 30*time.Second, "a drain error (the Ready node waits for its Terminating pod)", func(n *corev1.Node) bool {
		return n.Annotations[protocol.DrainError] != ""
	})
	if n.Annotations[protocol.RebootOK] == protocol.True {
		t.Fatal("granted without the bound: a Ready node must wait for its pods")
	}
	stop()
	start := time.Now()
	startOperator(t, opOptions{forceDrain: true, drainTO: time.Minute, spec: func(s *policy.Spec) { s.Drain.SkipWaitForDeleteAll = metav1.Duration{Duration: time.Second} }})
	waitNode(t, "stuckready-0", 45*time.Second, "reboot-ok after a drain that skipped the stuck pod", func(n *corev1.Node) bool {
		return n.Annotations[protocol.RebootOK] == protocol.True
	})
	if took := time.Since(start); took >= time.Minute {
		t.Errorf("granted after %s: the drain waited out its timeout instead of skipping the stuck pod", took)
	}
}

// kured's --drain-pod-selector: only matching pods are evicted; the others stay on the node.
func TestDrainPodSelector(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	if _, err := testenv.CreateNode(ctx, client, "select-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	workload(t, "select", "web", "select-0", 2)
	workload(t, "select", "db", "select-0", 1)
	startOperator(t, opOptions{spec: func(s *policy.Spec) { s.Drain.PodSelector = "app=web" }})
	annotate(t, "select-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "select-0", 30*time.Second, "reboot-ok", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	for app, want := range map[string]int{"web": 0, "db": 1} {
		l, err := client.CoreV1().Pods("select").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app, FieldSelector: "spec.nodeName=select-0"})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(l.Items); got != want {
			t.Errorf("pods app=%s left on the node: %d, want %d", app, got, want)
		}
	}
}

// --drain-failure-policy=skip: one node whose drain cannot finish (a pod no controller manages) does
// not hold the fleet: its cycle ends (undrainable, uncordoned, an Undrainable Warning, the metric),
// the next node goes, and the skipped one waits out --undrainable-retry, then queues again.
func TestDrainFailurePolicySkip(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	for _, name := range []string{"skip-0", "skip-1"} {
		if _, err := testenv.CreateNode(ctx, client, name, "boot-a", nil); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "skip"}}, metav1.CreateOptions{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lonely", Namespace: "skip"}, Spec: corev1.PodSpec{NodeName: "skip-0", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if _, err := client.CoreV1().Pods("skip").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	startOperator(t, opOptions{policy: operator.DrainSkip, metrics: operator.NewMetrics(reg), spec: func(s *policy.Spec) {
		s.Drain.UndrainableRetry = metav1.Duration{Duration: 3 * time.Second}
	}})
	annotate(t, "skip-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "skip-0", 20*time.Second, "admitted (or already skipped)", func(n *corev1.Node) bool {
		return n.Annotations[protocol.CycleStarted] != "" || n.Annotations[protocol.Undrainable] != ""
	})
	annotate(t, "skip-1", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	n := waitNode(t, "skip-0", 30*time.Second, "skipped as undrainable", func(n *corev1.Node) bool {
		return strings.Contains(n.Annotations[protocol.Undrainable], "controller")
	})
	if n.Spec.Unschedulable || n.Annotations[protocol.Cordoned] != "" || n.Annotations[protocol.RebootOK] == protocol.True || n.Annotations[protocol.CycleStarted] != "" {
		t.Errorf("the skipped node's cycle did not end cleanly: unschedulable=%v %v", n.Spec.Unschedulable, n.Annotations)
	}
	waitNode(t, "skip-1", 30*time.Second, "the next node granted", func(n *corev1.Node) bool { return n.Annotations[protocol.RebootOK] == protocol.True })
	if !waitEvent(t, "skip-0", "Undrainable") {
		t.Error("no Undrainable Event")
	}
	if got := counterLabel(t, reg, "slipway_operator_cycles_total", "result", "undrainable"); got != 1 {
		t.Errorf("cycles_total{result=undrainable} = %v", got)
	}
	waitNode(t, "skip-0", 20*time.Second, "held by --undrainable-retry", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "undrainable: its drain failed at ")
	})
	// After the retry it queues again: here behind skip-1, which holds the only slot.
	waitNode(t, "skip-0", 20*time.Second, "queued again after the retry", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "budget: full")
	})
}
