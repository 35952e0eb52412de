package operator_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/blocker"
	"github.com/slipway-dev/slipway/operator/policy"
)

// Promotion from staging to production on real parts: two real control planes, each with its own
// operator and simulated agents on real D-Bus, and a real Prometheus scraping the staging operator
// (labels cluster="staging"). Production requires staging's proof and a soak: its node that staged V
// waits until staging rolled V and the soak passed, then rolls; a version that failed staging's canary
// never rolls in production; with the Prometheus stopped production holds (fail closed, proof-source)
// and goes back to judging the proof once it answers again.
func TestPromotionAcrossClusters(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	staging, err := testenv.StartControlPlane(ctx, t.TempDir(), testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(staging.Stop)
	sc := staging.Client()
	const ns = "slipway-promotion"
	if _, err := sc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Staging: its operator (canaries halt a version after one failure) and its metrics on a port.
	reg := prometheus.NewRegistry()
	m := operator.NewMetrics(reg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	s0, err := simnode.New(ctx, "staging-0", simnode.Options{Client: sc, Dir: t.TempDir(), Log: klog.Background(), RebootDelay: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s0.Stop)
	startOperator(t, opOptions{max: "1", metrics: m, spec: func(s *policy.Spec) { s.Canary.MaxFailedPerVersion = 1 },
		tweak: func(c *operator.Config) { c.Client, c.Namespace = sc, ns }})

	// The Prometheus that sees staging, and production's operator that reads it.
	promDir := t.TempDir()
	pcfg := testenv.PrometheusConfig{Targets: []testenv.ScrapeTarget{{Job: "slipway", Address: l.Addr().String(), Labels: map[string]string{"cluster": "staging"}}}}
	prom, err := testenv.StartPrometheusWith(promDir, pcfg)
	if err == testenv.ErrNoPrometheus {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prom.Stop() })
	// The source the policy compiles to, made first with a short cache (the first config wins).
	src, err := blocker.SharedProofSource(blocker.ProofSourceConfig{URL: prom.URL, TTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const soak = 15 * time.Second
	const sel = `cluster="staging"`
	prod := simNodes(t, "prod", 3)
	startOperator(t, opOptions{max: "3", spec: func(s *policy.Spec) {
		s.ProofSource.URL = prom.URL
		s.Versions.RequireProof = policy.RequireProof{Selector: sel, MinCycles: 1, Soak: metav1.Duration{Duration: soak}}
	}})

	// 1. Production stages V first: nothing proves it yet.
	const v = "4700.1.0"
	stageVersion(t, prod[0], v)
	waitNode(t, prod[0].Name, 30*time.Second, "held: no proof", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "proof: "+v+": {"+sel+"} has no proof of it")
	})

	// 2. Staging rolls V; production soaks it, then rolls.
	stageVersion(t, s0, v)
	waitNodeOn(t, sc, s0.Name, 30*time.Second, "staging rolled V", func(n *corev1.Node) bool { return finished(n) && n.Labels[protocol.Version] == v })
	waitNode(t, prod[0].Name, 30*time.Second, "soaking", func(n *corev1.Node) bool {
		return strings.Contains(n.Annotations[protocol.BlockedBy], "proved it") && strings.Contains(n.Annotations[protocol.BlockedBy], "soak 15s")
	})
	n := waitNode(t, prod[0].Name, 60*time.Second, "production admitted V", admittedNow)
	admitted, err := time.Parse(time.RFC3339, n.Annotations[protocol.CycleStarted])
	if err != nil {
		t.Fatal(err)
	}
	waitNode(t, prod[0].Name, 60*time.Second, "production rolled V", func(n *corev1.Node) bool { return finished(n) && n.Labels[protocol.Version] == v })
	series, err := src.Series(ctx, v, sel)
	if err != nil || len(series) != 1 || series[0].ProvenSince.IsZero() {
		t.Fatalf("staging's proof of %s: %+v, %v", v, series, err)
	}
	proven := series[0].ProvenSince
	t.Logf("staging proved %s at %s; soak %s; production's node admitted at %s", v, proven.Format(time.RFC3339), soak, admitted.Format(time.RFC3339))
	// Whole seconds on both sides: a second of slack.
	if admitted.Add(time.Second).Before(proven.Add(soak)) {
		t.Errorf("admitted at %s, before staging's proof (%s) plus the soak (%s)", admitted, proven, soak)
	}

	// 3. A version that failed staging's canary never rolls in production.
	const bad = "4700.2.0"
	s0.RollBackNextUpdate()
	stageVersion(t, s0, bad)
	waitNodeOn(t, sc, s0.Name, 30*time.Second, "staging's canary failed", func(n *corev1.Node) bool {
		return n.Annotations[protocol.FailedVersion] == bad
	})
	stageVersion(t, prod[1], bad)
	waitNode(t, prod[1].Name, 30*time.Second, "held: halted at staging", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "proof: "+bad+": halted at ")
	})

	// 4. The Prometheus stops: fail closed. Back on the same port: the proof is judged again.
	prom.Stop()
	const third = "4700.3.0"
	stageVersion(t, prod[2], third)
	waitNode(t, prod[2].Name, 30*time.Second, "held: no answer", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "proof-source: "+third+": no answer from the proof source")
	})
	pcfg.Port = prom.Port
	if prom, err = testenv.StartPrometheusWith(promDir, pcfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prom.Stop() })
	waitNode(t, prod[2].Name, 30*time.Second, "judged again", func(n *corev1.Node) bool {
		return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "proof: "+third+": {"+sel+"} has no proof of it")
	})
	if n := getNode(t, prod[1].Name); admittedNow(n) {
		t.Errorf("%s admitted for %s, which failed on staging", prod[1].Name, bad)
	}
}

// waitNodeOn is waitNode against another cluster's client.
func waitNodeOn(t *testing.T, c kubernetes.Interface, name string, timeout time.Duration, what string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	return testenv.MustWaitNode(t, c, name, timeout, what, cond)
}
