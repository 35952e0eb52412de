package status

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// conflictOnce makes the first PATCH of each Node named in change fail with a conflict after
// change(node) was written to it, as a kubelet or an agent writing between the command's read and its
// write would; it counts every PATCH per Node.
func conflictOnce(t *testing.T, cs *fake.Clientset, change map[string]func(*corev1.Node)) map[string]int {
	t.Helper()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	patches := map[string]int{}
	cs.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.PatchAction).GetName()
		patches[name]++
		f := change[name]
		if f == nil || patches[name] > 1 {
			return false, nil, nil
		}
		cur, err := cs.Tracker().Get(gvr, "", name)
		if err != nil {
			t.Fatal(err)
		}
		n := cur.(*corev1.Node).DeepCopy()
		f(n)
		n.ResourceVersion += "1"
		if err := cs.Tracker().Update(gvr, n, ""); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, name, nil)
	})
	return patches
}

func pausableNode(name string, ann map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Annotations: ann}}
}

// A Node that changed between the read and the write is read again and decided again: a kubelet's
// status change is no reason to stop, and the rest of the fleet is still resumed; a node that a
// person paused by hand meanwhile keeps that pause.
func TestResumeNodesRetriesAChangedNode(t *testing.T) {
	ours := map[string]string{protocol.RebootPaused: protocol.True, protocol.PausedBy: "alice 2026-11-26T03:00:00Z"}
	cs := fake.NewSimpleClientset(pausableNode("a", ours), pausableNode("b", ours), pausableNode("c", ours))
	patches := conflictOnce(t, cs, map[string]func(*corev1.Node){
		"a": func(n *corev1.Node) { n.Status.NodeInfo.BootID = "kubelet wrote" },
		// A person pauses b by hand meanwhile: paused-by gone, reboot-paused theirs.
		"b": func(n *corev1.Node) { delete(n.Annotations, protocol.PausedBy) },
	})
	var out bytes.Buffer
	c := &client{cs: cs}
	if err := c.resumeNodes(context.Background(), &out, options{nodes: []string{allNodes}}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"a": false, "b": true, "c": false} {
		n, _ := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if _, paused := n.Annotations[protocol.RebootPaused]; paused != want {
			t.Errorf("%s: paused %v, want %v (annotations %v)", name, paused, want, n.Annotations)
		}
	}
	if patches["a"] != 2 || patches["b"] != 1 || patches["c"] != 1 {
		t.Errorf("patches per node %v, want a:2 (conflict, retry) b:1 (conflict, then left alone) c:1", patches)
	}
	if s := out.String(); !strings.Contains(s, "resumed 2 nodes: a, c") || !strings.Contains(s, "left paused (paused by hand") {
		t.Errorf("output %q", s)
	}
}

// A Node that never stops changing ends the command with what to do, after a bounded number of tries.
func TestDecideAndPatchGivesUp(t *testing.T) {
	cs := fake.NewSimpleClientset(pausableNode("a", nil))
	tries := 0
	cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		tries++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "a", nil)
	})
	c := &client{cs: cs}
	n, _ := cs.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	_, err := c.decideAndPatch(context.Background(), *n, func(*corev1.Node) (string, map[string]*string) {
		return "paused", map[string]*string{protocol.RebootPaused: ptr(protocol.True)}
	})
	if err == nil || !strings.Contains(err.Error(), "kept changing") || !strings.Contains(err.Error(), "run the command again") {
		t.Errorf("err = %v", err)
	}
	if tries != conflictRetries+1 {
		t.Errorf("%d tries, want %d", tries, conflictRetries+1)
	}
}
