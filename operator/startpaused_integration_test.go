package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
)

// --start-paused on a fresh install: a node that asked for its reboot before the operator existed
// is held (blocked-by paused, the ConfigMap created paused with the reason and who); a person's
// resume lets it go. A restart with the ConfigMap present (an upgrade, a new leader) does not pause
// again: the next node goes at once.
func TestStartPaused(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns = "slipway-fresh"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, fleetswitch.ConfigMapName, metav1.DeleteOptions{})
	for _, name := range []string{"fresh-0", "fresh-1"} {
		if _, err := testenv.CreateNode(ctx, client, name, "boot-a", nil); err != nil {
			t.Fatal(err)
		}
	}
	annotate(t, "fresh-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)}) // staged before the install
	opts := opOptions{max: "2", tweak: func(c *operator.Config) { c.Namespace, c.StartPaused = ns, true }}
	stop := startOperator(t, opts)
	n := blockedBy(t, "fresh-0", "paused")
	if !strings.Contains(n.Annotations[protocol.BlockedBy], "installed paused (--start-paused)") || admittedNow(n) {
		t.Fatalf("fresh-0 on a fresh install: %v", n.Annotations)
	}
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, fleetswitch.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sw := fleetswitch.Read(cm); !sw.Paused || sw.By != "slipway-update-operator" || sw.Reason != operator.StartPausedReason {
		t.Errorf("switch on a fresh install: %+v", sw)
	}
	if _, err := client.CoreV1().ConfigMaps(ns).Patch(ctx, fleetswitch.ConfigMapName, types.MergePatchType, fleetswitch.ResumePatch(""), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNode(t, "fresh-0", 30*time.Second, "admitted after the resume", admittedNow)

	// The operator restarts (an upgrade): the ConfigMap exists, nothing pauses.
	stop()
	startOperator(t, opts)
	annotate(t, "fresh-1", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "fresh-1", 30*time.Second, "admitted after a restart: not paused again", admittedNow)
	if sw := fleetswitch.Read(mustCM(t, ns)); sw.Paused {
		t.Errorf("paused again after a restart: %+v", sw)
	}
}

func mustCM(t *testing.T, ns string) *corev1.ConfigMap {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), fleetswitch.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}
