package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

var rebootPolicies = schema.GroupVersionResource{Group: "update.slipway.dev", Version: "v1alpha1", Resource: "rebootpolicies"}

const poolLabel = "e2e.slipway.dev/pool"

func createRebootPolicy(t *testing.T, ctx context.Context, dyn dynamic.Interface, name string, spec v1alpha1.RebootPolicySpec) {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.RebootPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "update.slipway.dev/v1alpha1", Kind: "RebootPolicy"}, ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(rebootPolicies).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A pool's channel reaches a real VM and a denied version is never rebooted into while an allowed one
// is. Pool e2e-beta declares update.group beta; node-0's update.conf is its user's own, so the agent
// refuses and says why; once the user marks the file as Slipway's, the agent writes GROUP=beta, asks
// update_engine (the stand-in, which reads update.conf at every check) to check, beta's release
// (9999.1.0) is staged and the node reboots into it. Pool e2e-hold declares group lts and denies lts's
// release (9999.2.0): node-1's agent moves it to lts, it stages 9999.2.0 and waits with the rule named,
// and does not reboot.
func TestChannelAndDeniedVersionOnVM(t *testing.T) {
	f := features.New("update channel per pool, a denied version held").
		Assess("the channel reaches update.conf and the label; 9999.1.0 rolls, 9999.2.0 waits", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			skipIfNeeded(t)
			if cluster == nil {
				t.Skip("needs a shell into the nodes (the local QEMU provider)")
			}
			c := clientset(t, cfg)
			dyn, err := dynamic.NewForConfig(cfg.Client().RESTConfig())
			if err != nil {
				t.Fatal(err)
			}
			names := nodeNames(t, ctx, c)
			beta, held := names[0], names[1]
			sh := nodeShell(ctx, t, cluster.VM(beta))
			// node-1's file is Slipway's to edit from the start (as the new-node snippet writes it).
			nodeShell(ctx, t, cluster.VM(held))("grep -qx '# managed-by: slipway' /etc/flatcar/update.conf || sed -i '1i # managed-by: slipway' /etc/flatcar/update.conf")
			hs := before(t, ctx, c, held)
			for node, pool := range map[string]string{beta: "beta", held: "hold"} {
				body := `{"metadata":{"labels":{"` + poolLabel + `":"` + pool + `"}}}`
				if _, err := c.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", []byte(body), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			sel := func(v string) metav1.LabelSelector {
				return metav1.LabelSelector{MatchLabels: map[string]string{poolLabel: v}}
			}
			betaGroup, ltsGroup := "beta", "lts"
			createRebootPolicy(t, ctx, dyn, "e2e-beta", v1alpha1.RebootPolicySpec{NodeSelector: sel("beta"), Update: &v1alpha1.Update{Group: &betaGroup}})
			createRebootPolicy(t, ctx, dyn, "e2e-hold", v1alpha1.RebootPolicySpec{NodeSelector: sel("hold"), Update: &v1alpha1.Update{Group: &ltsGroup},
				Versions: &v1alpha1.Versions{Deny: []string{"9999.2.0"}}})

			// 1. node-0: the user's own update.conf: refused, said on the Node, the file untouched.
			userConf := sh("cat /etc/flatcar/update.conf")
			if _, err := testenv.WaitNode(ctx, c, beta, 2*time.Minute, func(n *corev1.Node) bool {
				return n.Annotations[protocol.PoolGroup] == "beta" && strings.Contains(n.Annotations[protocol.UpdateConfError], "managed-by: slipway")
			}); err != nil {
				t.Fatalf("%s: the agent's refusal of a file not Slipway's: %v", beta, err)
			}
			if after := sh("cat /etc/flatcar/update.conf"); after != userConf {
				t.Fatalf("the user's update.conf changed from %q to %q", userConf, after)
			}
			t.Logf("%s: update.conf is the user's own (%q): left alone, update-conf-error says why", beta, userConf)

			// 2. node-1 follows lts (its agent writes it and asks update_engine), stages lts's release and
			// waits, named.
			if _, err := testenv.WaitNode(ctx, c, held, 2*time.Minute, func(n *corev1.Node) bool {
				return n.Labels[protocol.Group] == "lts" && strings.HasPrefix(n.Annotations[protocol.BlockedBy], "version: 9999.2.0 denied by rp/e2e-hold")
			}); err != nil {
				t.Fatalf("%s: not on lts and held for its denied version: %v", held, err)
			}

			// 3. The user marks node-0's file as Slipway's: GROUP=beta written, other lines kept,
			// update_engine asked, beta's release staged and rebooted into.
			bs := before(t, ctx, c, beta)
			sh("sed -i '1i # managed-by: slipway' /etc/flatcar/update.conf")
			waitRebooted(t, ctx, c, bs, rebootLimit)
			n, err := c.CoreV1().Nodes().Get(ctx, beta, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n.Labels[protocol.Version] != "9999.1.0" || n.Labels[protocol.Group] != "beta" {
				t.Errorf("%s after its reboot: version %q, group %q", beta, n.Labels[protocol.Version], n.Labels[protocol.Group])
			}
			if _, ok := n.Annotations[protocol.UpdateConfError]; ok {
				t.Errorf("%s: update-conf-error %q left", beta, n.Annotations[protocol.UpdateConfError])
			}
			conf := sh("cat /etc/flatcar/update.conf")
			if conf != "# managed-by: slipway\nGROUP=beta" {
				t.Errorf("%s: update.conf after the reboot = %q", beta, conf)
			}
			t.Logf("%s: update.conf %q, group label beta, rebooted into 9999.1.0", beta, conf)

			// 4. The denied version was never rebooted into: node-1 is still held, on its boot.
			h, err := c.CoreV1().Nodes().Get(ctx, held, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			boots, err := cluster.VM(held).BootCount(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if h.Status.NodeInfo.BootID != hs.bootID || boots != hs.boots || !strings.HasPrefix(h.Annotations[protocol.BlockedBy], "version: 9999.2.0 denied") {
				t.Errorf("%s: boot %s (was %s), boots %d (was %d), blocked-by %q", held, h.Status.NodeInfo.BootID, hs.bootID, boots, hs.boots, h.Annotations[protocol.BlockedBy])
			}
			t.Logf("%s: on lts, still held (%s), not rebooted", held, h.Annotations[protocol.BlockedBy])
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}
