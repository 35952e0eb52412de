package operator_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/policy"
	"github.com/slipway-dev/slipway/operator/status"
)

// On a real API server: the operator runs the policy compiled from a Spec (its exclusion holds the
// node), publishes that Spec as typed data in slipway-fleet, and the status view compiles what was
// published into the same schedule and budget.
func TestPublishedPolicies(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns = "slipway-policies"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, fleetswitch.ConfigMapName, metav1.DeleteOptions{})
	now := time.Now().UTC()
	spec := policy.Defaults()
	spec.MaxUnavailable, spec.Canary.Nodes = "2", 1
	spec.Exclusions = []string{now.AddDate(0, 0, -1).Format("2006-01-02") + "/" + now.AddDate(0, 0, 1).Format("2006-01-02")}
	p := policy.MustCompile(spec)
	if _, err := testenv.CreateNode(ctx, client, "pub-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	startOperator(t, opOptions{tweak: func(c *operator.Config) { c.Policy, c.Namespace = *p, ns }})
	annotate(t, "pub-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	n := blockedBy(t, "pub-0", "window")
	if !strings.Contains(n.Annotations[protocol.BlockedBy], "closed until") {
		t.Errorf("held by the exclusion: %q", n.Annotations[protocol.BlockedBy])
	}
	var cm *corev1.ConfigMap
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		cm = mustCMOrNil(ns)
		return cm != nil && cm.Data[fleetswitch.KeyPolicies] != "", nil
	}); err != nil {
		t.Fatalf("no policies published in %s/%s: %v", ns, fleetswitch.ConfigMapName, err)
	}
	pub, err := policy.ReadPublished(cm.Data[fleetswitch.KeyPolicies])
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := pub.Default(); !ok || !reflect.DeepEqual(got, p.Spec) {
		t.Errorf("published %+v, runs %+v", got, p.Spec)
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	view := status.Build(nodes.Items, cm, fleetrecord.Record{}, ns, time.Now())
	if s := view.Fleet.Schedule; !s.Known || s.Open || !strings.Contains(s.ClosedBy, "reboot exclusion") {
		t.Errorf("the view's schedule %+v: want closed by the exclusion", s)
	}
	if b := view.Fleet.Budgets[0]; b.Max != "2" || b.Limit == nil {
		t.Errorf("the view's fleet budget %+v: want max 2", b)
	}
}

func mustCMOrNil(ns string) *corev1.ConfigMap {
	cm, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), fleetswitch.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return cm
}
