package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/policy"
)

// The same Warning again within the window is dropped; another reason, another message or another
// node passes; Normal Events always pass.
func TestDedupRecorder(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	fr := record.NewFakeRecorder(100)
	d := newDedupRecorder(fr, 10*time.Minute, func() time.Time { return now })
	a := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "ua"}}
	b := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "ub"}}
	for i := 0; i < 100; i++ {
		d.Eventf(a, corev1.EventTypeWarning, "MalformedAnnotation", "bad: %s", "x")
	}
	d.Event(a, corev1.EventTypeWarning, "MalformedAnnotation", "bad: y")
	d.Event(a, corev1.EventTypeWarning, "DrainFailed", "bad: x")
	d.Event(b, corev1.EventTypeWarning, "MalformedAnnotation", "bad: x")
	d.Event(a, corev1.EventTypeNormal, "Draining", "cordoned")
	d.Event(a, corev1.EventTypeNormal, "Draining", "cordoned")
	now = now.Add(11 * time.Minute)
	d.Eventf(a, corev1.EventTypeWarning, "MalformedAnnotation", "bad: %s", "x")
	close(fr.Events)
	var got []string
	for e := range fr.Events {
		got = append(got, e)
	}
	want := []string{
		"Warning MalformedAnnotation bad: x", "Warning MalformedAnnotation bad: y", "Warning DrainFailed bad: x",
		"Warning MalformedAnnotation bad: x", "Normal Draining cordoned", "Normal Draining cordoned",
		"Warning MalformedAnnotation bad: x",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
}

// /readyz for the leader: ready once synced and syncing; not ready when a sync hangs (here: a PATCH
// that never returns) for StuckAfter. A controller that does not run (a standby) is ready.
func TestReady(t *testing.T) {
	client := fake.NewSimpleClientset()
	block := make(chan struct{})
	defer close(block)
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-block
		return true, nil, context.Canceled
	})
	c, err := New(Config{Client: client, Policy: *policy.MustCompile(fixtureSpec()), StuckAfter: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(); err != nil {
		t.Fatalf("standby must be ready: %v", err)
	}
	if err := c.Live(); err != nil {
		t.Fatalf("standby must be live: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !c.synced.Load() {
		if time.Now().After(deadline) {
			t.Fatal("never synced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Ready(); err != nil {
		t.Fatalf("synced, idle leader must be ready: %v", err)
	}
	// A node to admit: its PATCH hangs.
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{protocol.RebootNeeded: "true"}}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for c.Ready() == nil {
		if time.Now().After(deadline) {
			t.Fatal("a sync hanging for longer than StuckAfter must make /readyz fail")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Ready(); !strings.Contains(err.Error(), "sync has been running") {
		t.Errorf("reason: %v", err)
	}
	// Liveness says the same: a wedged leader is restarted and loses its lease.
	if err := c.Live(); err == nil || !strings.Contains(err.Error(), "sync has been running") {
		t.Errorf("Live() of a wedged leader: %v", err)
	}
}
