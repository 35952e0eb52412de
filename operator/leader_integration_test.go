package operator_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
)

// runOperatorProcess starts the real update-operator binary with leader election on.
func runOperatorProcess(t *testing.T, identity string, extra ...string) *operatorproc.Proc {
	t.Helper()
	needOperatorBinary(t)
	args := append([]string{
		"--kubeconfig=" + cp.Kubeconfig, "--namespace=slipway-leader", "--identity=" + identity,
		"--lease-duration=4s", "--renew-deadline=3s", "--retry-period=500ms", "--http-address=127.0.0.1:0",
	}, extra...) // a flag given again in extra wins
	return operatorproc.StartT(t, bins, args, identity)
}

func leaseHolder(t *testing.T) string {
	l, err := client.CoordinationV1().Leases("slipway-leader").Get(context.Background(), "slipway-update-operator", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// Two operator processes; the leader is killed (SIGKILL, no lease release) while a node is mid-cycle.
// The other takes over from the Nodes alone, finishes every cycle, and the budget of 1 is never
// exceeded at any instant.
func TestLeaderKilledMidCycle(t *testing.T) {
	needOperatorBinary(t)
	cleanNodes(t)
	ctx := context.Background()
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "slipway-leader"}}, metav1.CreateOptions{})
	_ = client.CoordinationV1().Leases("slipway-leader").Delete(ctx, "slipway-update-operator", metav1.DeleteOptions{})
	hold := "example.com/hold"
	nodes := simNodes(t, "leader", 3)
	w := watchBudget(t)
	flags := []string{"--max-unavailable=1", "--before-reboot-annotations=" + hold}
	procs := map[string]*operatorproc.Proc{"op-a": runOperatorProcess(t, "op-a", flags...)}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return leaseHolder(t) == "op-a", nil
	}); err != nil {
		t.Fatal("op-a never became leader")
	}
	procs["op-b"] = runOperatorProcess(t, "op-b", flags...)
	for _, sn := range nodes {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	// Mid-cycle: one node waits in before-reboot for its hook.
	var first string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, sn := range nodes {
			if getNode(t, sn.Name).Labels[protocol.BeforeReboot] == protocol.True {
				first = sn.Name
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal("no node reached before-reboot")
	}
	leader := leaseHolder(t)
	procs[leader].Kill()
	killedAt := time.Now()
	t.Logf("killed leader %s while %s waits in before-reboot", leader, first)

	// The hook: approve whatever waits in before-reboot, as a hook DaemonSet would.
	hookCtx, stopHook := context.WithCancel(ctx)
	defer stopHook()
	go func() {
		for hookCtx.Err() == nil {
			l, err := client.CoreV1().Nodes().List(hookCtx, metav1.ListOptions{LabelSelector: protocol.BeforeReboot + "=true"})
			if err == nil {
				for _, n := range l.Items {
					if n.Annotations[hold] != protocol.True {
						body := []byte(`{"metadata":{"annotations":{"` + hold + `":"true"}}}`)
						_, _ = client.CoreV1().Nodes().Patch(hookCtx, n.Name, types.MergePatchType, body, metav1.PatchOptions{})
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for _, sn := range nodes {
		waitNode(t, sn.Name, 90*time.Second, "cycle finished after failover", finished)
	}
	stopHook()
	w.stop()
	survivor := map[string]string{"op-a": "op-b", "op-b": "op-a"}[leader]
	if h := leaseHolder(t); h != survivor {
		t.Errorf("lease held by %q, want the survivor %q", h, survivor)
	}
	if m := w.Max(); m > 1 {
		t.Errorf("budget exceeded during failover: %d nodes unavailable at once", m)
	}
	for _, sn := range nodes {
		if sn.Boots() != 1 {
			t.Errorf("%s rebooted %d times, want 1", sn.Name, sn.Boots())
		}
	}
	t.Logf("all cycles finished %s after the leader was killed", time.Since(killedAt).Round(time.Millisecond))
}
