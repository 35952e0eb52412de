package kubeclient

import (
	"context"
	"flag"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestLimitsValidate(t *testing.T) {
	for _, l := range []Limits{OperatorLimits, AgentLimits, {QPS: 0.5, Burst: 1}} {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v refused: %v", l, err)
		}
	}
	for _, l := range []Limits{{QPS: 0, Burst: 10}, {QPS: -1, Burst: 10}, {QPS: math.NaN(), Burst: 10}, {QPS: math.Inf(1), Burst: 10}, {QPS: 5, Burst: 0}, {QPS: 5, Burst: -1}, {QPS: 5, Burst: 10, Timeout: -time.Second}} {
		if err := l.Validate(); err == nil {
			t.Errorf("%+v accepted", l)
		}
	}
}

func TestLimitsFlags(t *testing.T) {
	var l Limits
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	l.AddFlags(fs, OperatorLimits)
	if l != OperatorLimits {
		t.Errorf("defaults %+v, want %+v", l, OperatorLimits)
	}
	if err := fs.Parse([]string{"--kube-api-qps=12.5", "--kube-api-burst=30", "--kube-api-timeout=5s"}); err != nil {
		t.Fatal(err)
	}
	if l != (Limits{QPS: 12.5, Burst: 30, Timeout: 5 * time.Second}) {
		t.Errorf("parsed %+v", l)
	}
}

// The limits reach the client, client-side waits are measured, and a bad limit builds no client.
func TestRestConfigLimitsAndMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"}}`))
	}))
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(strings.ReplaceAll(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: URL}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, "URL", srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := RestConfig(kc, "test", Limits{QPS: 0, Burst: 1}); err == nil {
		t.Fatal("QPS 0 accepted")
	}
	cfg, err := RestConfig(kc, "test", Limits{QPS: 4, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 4 || cfg.Burst != 1 {
		t.Fatalf("rest config QPS %v burst %d", cfg.QPS, cfg.Burst)
	}
	reg := prometheus.NewRegistry()
	RegisterMetrics(reg, "test")
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const requests = 5
	for i := 0; i < requests; i++ {
		if _, err := client.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var wait *dto.Histogram
	var ok float64
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			switch mf.GetName() {
			case "test_kube_api_rate_limiter_wait_seconds":
				wait = m.Histogram
			case "test_kube_api_requests_total":
				if label(m, "code") == "200" && label(m, "method") == "GET" {
					ok = m.Counter.GetValue()
				}
			}
		}
	}
	if wait == nil || wait.GetSampleCount() != requests {
		t.Fatalf("rate limiter waits observed: %v, want %d", wait, requests)
	}
	// A token bucket of 4/s and burst 1: the 4 requests after the first waited ~1 s together
	// (a lower bound: a slow machine only waits longer).
	if wait.GetSampleSum() < 0.5 {
		t.Errorf("waits sum to %.3f s; QPS 4 with burst 1 makes 5 requests wait about 1 s", wait.GetSampleSum())
	}
	if ok != requests {
		t.Errorf("requests_total{code=200,method=GET} = %v, want %d", ok, requests)
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
