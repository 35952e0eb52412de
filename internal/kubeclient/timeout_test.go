package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A request the API server accepted and never answers ends at --kube-api-timeout with an error the
// caller can retry; a watch, long by design, is not cut at that bound.
func TestRequestsHaveADeadlineWatchesDoNot(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select { // an event after three timeouts, on the same stream
			case <-time.After(900 * time.Millisecond):
				fmt.Fprintln(w, `{"type":"ADDED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"late","resourceVersion":"2"}}}`)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
			<-release
			return
		}
		select { // every other request: accepted, never answered
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release) // before Close, which waits for the handlers
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RestConfig(kc, "test", Limits{QPS: 100, Burst: 100, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CoreV1().Nodes().Get(context.Background(), "x", metav1.GetOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a request nobody answers: %v, want a deadline error", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a request nobody answers did not end: no deadline")
	}

	w, err := cs.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok || ev.Type != "ADDED" {
			t.Fatalf("watch ended or errored before its event (cut by the request deadline?): %v %+v", ok, ev)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no watch event")
	}
}
