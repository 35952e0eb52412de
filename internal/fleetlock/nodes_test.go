package fleetlock

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// Every FleetLock write is conditional on the resourceVersion it decided on: an operator step in
// between makes the write fail (Zincati retries) instead of landing on a Node that changed.
func TestWritesAreConditional(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fcos", ResourceVersion: "42",
		Labels: map[string]string{protocol.FleetLockEnrolled: protocol.True}}}
	client := fake.NewSimpleClientset(n.DeepCopy())
	var bodies []map[string]interface{}
	client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		var m map[string]interface{}
		_ = json.Unmarshal(a.(k8stesting.PatchAction).GetPatch(), &m)
		bodies = append(bodies, m)
		return false, nil, nil
	})
	b := &Nodes{Client: client, ByID: func(string) ([]*corev1.Node, error) { return []*corev1.Node{n}, nil }}
	if _, err := b.PreReboot(context.Background(), "id", "default"); err != nil {
		t.Fatal(err)
	}
	n.Annotations = map[string]string{protocol.RebootNeeded: protocol.True}
	if err := b.SteadyState(context.Background(), "id", "default"); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 2 {
		t.Fatalf("%d patches, want 2", len(bodies))
	}
	for i, m := range bodies {
		meta, _ := m["metadata"].(map[string]interface{})
		if meta["resourceVersion"] != "42" {
			t.Errorf("patch %d not conditional on resourceVersion 42: %v", i, m)
		}
	}
}
