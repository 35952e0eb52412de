package operator

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/notify"
)

// A node held (here by a fleet-wide blocker) and then deleted ends its episode in the notifier: the
// next node held the same way is announced too, not silenced until a restart because the deleted
// node's message still "stands".
func TestBlockedNotificationsSurviveNodeDeletion(t *testing.T) {
	got := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	sender, err := notify.New([]string{"generic://" + srv.Listener.Addr().String() + "/hook?disabletls=yes"}, nil, klog.Background(),
		notify.BlockedAfter(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sender.Run(ctx)
	need := map[string]string{"F/reboot-needed": "true"}
	held := admission.Func{N: "alerts", Fleet: true, F: func(context.Context, *corev1.Node) (bool, string) { return true, "Maintenance firing" }}
	f := newFixture(t, nil, func(c *Config) { c.Notify = sender; c.Blockers = []admission.Blocker{held} },
		node("a", need, nil), node("b", nil, nil))
	f.sync("a")
	select {
	case msg := <-got:
		if !strings.Contains(msg, "node a") {
			t.Fatalf("first message %q, want node a's", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no blocked notification for node a")
	}
	if err := f.client.CoreV1().Nodes().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.c.informer.GetIndexer().Delete(node("a", nil, nil)); err != nil {
		t.Fatal(err)
	}
	f.sync("a") // gone: forgotten
	n, _ := f.client.CoreV1().Nodes().Get(ctx, "b", metav1.GetOptions{})
	n.Annotations = node("b", need, nil).Annotations
	if _, err := f.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync("b")
	select {
	case msg := <-got:
		if !strings.Contains(msg, "node b") {
			t.Fatalf("second message %q, want node b's", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("node b held the same way after node a was deleted: no notification (the deleted node's message still stands)")
	}
}
