package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
	"github.com/slipway-dev/slipway/internal/updateconf"
	"github.com/slipway-dev/slipway/internal/updateengine"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/policy"
)

// A pool's update channel reaches its nodes and a denied version waits while an allowed one rolls, on
// a real API server with agents on real D-Bus: the flags' pool follows stable and denies 4500.0.0
// (what the stand-in's server offers stable); RebootPolicy beta moves its node to the beta channel
// and a server of its own. That node's agent writes update.conf and asks update_engine, which reads
// it, stages what beta offers (4600.5.0), and the node reboots into it; the stable node, asked to
// update, stages 4500.0.0 and is held, naming the version and the rule. A policy with a plain http
// server is refused (Accepted=False) and a node moved into it keeps the keys it had.
func TestPoolUpdateChannel(t *testing.T) {
	dyn := needPools(t)
	cleanNodes(t)
	sns := simNodesWith(t, "uc", 2, simnode.Options{Offers: map[string]string{"beta": "4600.5.0"}})
	beta, stable := sns[0], sns[1]
	label(t, beta.Name, map[string]string{"pool": "beta"})
	const nebraska = "https://nebraska.example/v1/update/"
	createPolicy(t, dyn, "beta", v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", "beta"), MaxUnavailable: ptr(intstr.FromInt32(1)),
		Update: &v1alpha1.Update{Group: ptr("beta"), Server: ptr(nebraska)}})
	createPolicy(t, dyn, "insecure", v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", "insecure"),
		Update: &v1alpha1.Update{Server: ptr("http://nebraska.example/v1/update/")}})
	startOperator(t, opOptions{max: "2", spec: func(s *policy.Spec) {
		s.Update.Group = "stable"
		s.Versions.Deny = []string{"4500.0.0"}
	}, tweak: func(c *operator.Config) { c.Dynamic = dyn }})

	bad := waitPolicy(t, dyn, "insecure", "refused", func(rp *v1alpha1.RebootPolicy) bool { return condition(rp, "Accepted") == metav1.ConditionFalse })
	if c := meta.FindStatusCondition(bad.Status.Conditions, "Accepted"); !strings.Contains(c.Message, "plain http is refused") {
		t.Errorf("insecure's Accepted: %+v", c)
	}

	// The beta node: its agent writes the pool's keys, update_engine checks with them and stages beta's
	// offer, and the node reboots into it, still following beta.
	n := waitNode(t, beta.Name, 60*time.Second, "rebooted into beta's offer", func(n *corev1.Node) bool {
		return finished(n) && n.Labels[protocol.Version] == "4600.5.0"
	})
	if n.Labels[protocol.Group] != "beta" || n.Annotations[protocol.Server] != nebraska || n.Annotations[protocol.PoolGroup] != "beta" {
		t.Errorf("beta node: group %q, server %q, pool-group %q", n.Labels[protocol.Group], n.Annotations[protocol.Server], n.Annotations[protocol.PoolGroup])
	}
	if checks := beta.UE.Checks(); len(checks) != 1 || checks[0] != (updateconf.Settings{Group: "beta", Server: nebraska}) {
		t.Errorf("beta node's update_engine checked with %+v", checks)
	}

	// The stable node: the flags' group, which its file already says (nothing written, nothing asked);
	// asked to update over D-Bus as update_engine's timer would, it stages 4500.0.0 and is held.
	n = waitNode(t, stable.Name, 20*time.Second, "told the flags' group", func(n *corev1.Node) bool {
		return n.Annotations[protocol.PoolGroup] == "stable"
	})
	if _, ok := n.Annotations[protocol.PoolServer]; ok {
		t.Errorf("pool-server %q on a node whose pool declares none", n.Annotations[protocol.PoolServer])
	}
	conn, err := stable.Bus.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := updateengine.NewClient(conn).AttemptUpdate(context.Background()); err != nil {
		t.Fatal(err)
	}
	n = waitNode(t, stable.Name, 30*time.Second, "held for its denied version", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "version: 4500.0.0 denied by")
	})
	if admittedNow(n) || n.Labels[protocol.Version] != "4459.2.1" {
		t.Errorf("denied node: cycle-started %q, version %q", n.Annotations[protocol.CycleStarted], n.Labels[protocol.Version])
	}
	if checks := stable.UE.Checks(); len(checks) != 1 || checks[0].Group != "stable" {
		t.Errorf("stable node's update_engine checked with %+v", checks)
	}

	// Moved into the refused pool: its keys stay as they were, never the refused server's.
	label(t, stable.Name, map[string]string{"pool": "insecure"})
	// Its sync looked: blocked-by names the refused pool now.
	n = waitNode(t, stable.Name, 20*time.Second, "held by the refused pool", func(n *corev1.Node) bool {
		return strings.Contains(n.Annotations[protocol.BlockedBy], "insecure")
	})
	if n.Annotations[protocol.PoolGroup] != "stable" || n.Annotations[protocol.PoolServer] != "" {
		t.Errorf("node in the refused pool: pool-group %q, pool-server %q", n.Annotations[protocol.PoolGroup], n.Annotations[protocol.PoolServer])
	}
	// Moved to beta: it follows beta's channel and server.
	label(t, stable.Name, map[string]string{"pool": "beta"})
	waitNode(t, stable.Name, 20*time.Second, "follows beta", func(n *corev1.Node) bool {
		return n.Annotations[protocol.PoolGroup] == "beta" && n.Labels[protocol.Group] == "beta" && n.Annotations[protocol.Server] == nebraska
	})

	// An edit of the pool reaches its idle node too (nothing else about that node changes).
	patchPolicy(t, dyn, "beta", map[string]interface{}{"spec": map[string]interface{}{"update": map[string]interface{}{"group": "alpha"}}})
	waitNode(t, beta.Name, 20*time.Second, "the idle node follows the edit", func(n *corev1.Node) bool {
		return n.Annotations[protocol.PoolGroup] == "alpha" && n.Labels[protocol.Group] == "alpha"
	})
}
