package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// deploy/node-prep on real nodes, as an admin with a running fleet uses it: the last node has drifted
// (locksmithd back and running, update-engine stopped), the DaemonSet's pods run
// `update-agent node-config apply` on every node through the real kubelet, the drifted node is in
// line again, and each node reports: its pod Running, its apply container's log saying what it changed
// (the drifted node) or that there was nothing to do (the others).
func TestNodePrepDaemonSet(t *testing.T) {
	f := features.New("existing fleet: node-prep DaemonSet").
		Assess("a drifted node brought in line by the DaemonSet's pod, the others untouched, each reporting", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			skipIfNeeded(t)
			if cluster == nil {
				t.Skip("needs a shell in the node (local provider)")
			}
			root, err := testenv.RepoRoot()
			if err != nil {
				t.Fatal(err)
			}
			// The last node: the scenarios after this one start on the first.
			vm := cluster.VMs[len(cluster.VMs)-1]
			sh := nodeShell(ctx, t, vm)
			states := func() string { return unitStates(sh) }
			// Whatever happens below, the node ends in line: a running locksmithd reboots on its own.
			defer putBackInLine(t, vm)
			sh("systemctl unmask locksmithd.service && systemctl enable --now locksmithd.service && systemctl disable --now update-engine.service")
			if got := states(); got != "enabled active disabled inactive" {
				t.Fatalf("drift not in place: %q", got)
			}

			// As the harness installs the agent: the image imported into the VMs, never pulled.
			dir, err := cluster.ApplyOverlay(ctx, "node-prep-e2e", filepath.Join(root, "deploy", "node-prep"), `
  - target: {kind: DaemonSet, name: slipway-node-prep}
    patch: |-
      - op: add
        path: /spec/template/spec/initContainers/0/imagePullPolicy
        value: Never
      - op: add
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: Never`)
			if err != nil {
				t.Fatal(err)
			}
			// Gone, pods included, before the next scenario: under TCG a kubelet still tearing pods down
			// starts the next one's pods minutes late.
			defer func() {
				if out, err := cluster.Kubectl(context.Background(), "delete", "-k", dir, "--cascade=foreground", "--wait=true", "--timeout=3m"); err != nil {
					t.Errorf("deleting the node-prep DaemonSet: %v\n%s", err, out)
				}
				if err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
					pods, err := cluster.Client.CoreV1().Pods("slipway-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=slipway-node-prep"})
					return err == nil && len(pods.Items) == 0, nil
				}); err != nil {
					t.Errorf("node-prep pods still there 3m after the delete: %v", err)
				}
			}()

			// Every node's pod Ready (its apply container done) within 5 minutes, as
			// `kubectl rollout status` waits for it.
			start := time.Now()
			deadline := start.Add(5 * time.Minute)
			for {
				ds, err := cluster.Client.AppsV1().DaemonSets("slipway-system").Get(ctx, "slipway-node-prep", metav1.GetOptions{})
				if err == nil && ds.Status.ObservedGeneration >= ds.Generation && ds.Status.DesiredNumberScheduled == int32(len(cluster.VMs)) &&
					ds.Status.NumberReady == ds.Status.DesiredNumberScheduled && ds.Status.UpdatedNumberScheduled == ds.Status.DesiredNumberScheduled {
					t.Logf("node-prep: %d of %d nodes ready after %s", ds.Status.NumberReady, len(cluster.VMs), time.Since(start).Round(time.Second))
					break
				}
				if time.Now().After(deadline) {
					pods, _ := cluster.Kubectl(ctx, "-n", "slipway-system", "get", "pods", "-l", "app.kubernetes.io/name=slipway-node-prep", "-o", "wide")
					t.Fatalf("node-prep not ready on every node after 5m (%v): pods:\n%s", err, pods)
				}
				if err := testenv.WaitCtx(ctx, 2*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			if got := states(); got != "masked inactive enabled active" {
				t.Fatalf("%s after the DaemonSet: locksmithd/update-engine = %q", vm.Name, got)
			}

			// Each node's report: its pod's containers' logs, read in the VM (kubectl logs cannot reach
			// kubelets behind slirp).
			pods, err := cluster.Client.CoreV1().Pods("slipway-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=slipway-node-prep"})
			if err != nil {
				t.Fatal(err)
			}
			if len(pods.Items) != len(cluster.VMs) {
				t.Fatalf("%d node-prep pods for %d nodes", len(pods.Items), len(cluster.VMs))
			}
			for _, p := range pods.Items {
				node := cluster.VM(p.Spec.NodeName)
				if node == nil {
					t.Fatalf("pod %s on unknown node %q", p.Name, p.Spec.NodeName)
				}
				read := func(container string) string {
					out, err := node.Exec(ctx, "/bin/sh", "-c", fmt.Sprintf("cat /var/log/pods/%s_%s_%s/%s/*.log", p.Namespace, p.Name, p.UID, container))
					if err != nil {
						t.Fatalf("%s: the %s container's log: %v", node.Name, container, err)
					}
					return out
				}
				applied, held := read("apply"), read("applied")
				if node == vm {
					for _, want := range []string{"stop locksmithd.service", "mask locksmithd.service", "enable update-engine.service", "start update-engine.service", "applied"} {
						if !strings.Contains(applied, want) {
							t.Errorf("%s (drifted): the apply log lacks %q:\n%s", node.Name, want, applied)
						}
					}
				} else if !strings.Contains(applied, "nothing to do") {
					t.Errorf("%s (in line): the apply log should say nothing to do:\n%s", node.Name, applied)
				}
				if !strings.Contains(held, "nothing to do") || !strings.Contains(held, "holding until stopped") {
					t.Errorf("%s: the applied container's log should check again, find nothing to do and hold:\n%s", node.Name, held)
				}
			}
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}
