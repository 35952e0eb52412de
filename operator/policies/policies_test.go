package policies

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/policy"
)

// For and ByPin are the one rule that says which policy a node runs under: known answers for a node
// out of its cycle, in its cycle pinned to this generation, to an older generation this process
// compiled, to one it never compiled, to a deleted policy, and with no pools at all.
func TestForResolvesOneWay(t *testing.T) {
	flags := policy.MustCompile(policy.Defaults())
	r := New(Config{Flags: flags})
	node := func(labels map[string]string, pin string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, Annotations: map[string]string{}}}
		if pin != "" {
			n.Annotations[protocol.AdmittedPolicy] = pin
		}
		return n
	}
	web := map[string]string{"pool": "web"}
	if got := r.For(node(web, ""), false); got != flags {
		t.Errorf("no pools: %p, want the flags' %p", got, flags)
	}
	rp := func(gen int64, max string) *v1alpha1.RebootPolicy {
		return &v1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: gen, UID: types.UID("0123456789abcdef")},
			Spec: v1alpha1.RebootPolicySpec{NodeSelector: metav1.LabelSelector{MatchLabels: web}, MaxUnavailable: ptr(intstr.FromString(max))}}
	}
	v1 := policy.CompilePool(flags.Spec, rp(1, "1"))
	v2 := policy.CompilePool(flags.Spec, rp(2, "2"))
	if v1.Err != "" || v2.Err != "" {
		t.Fatalf("pools did not compile: %q %q", v1.Err, v2.Err)
	}
	r.compiled.Store(pinOf("web", 1, "0123456789abcdef"), v1.Policy)
	r.pools.Store(policy.NewPoolSet([]*policy.Pool{v2}))
	for _, c := range []struct {
		name    string
		n       *corev1.Node
		inCycle bool
		want    *policy.Policy
	}{
		{"out of its cycle: its pool now", node(web, ""), false, v2.Policy},
		{"in no pool", node(nil, ""), false, flags},
		{"in its cycle, pinned to the generation it was admitted under", node(web, "web/1/01234567"), true, v1.Policy},
		{"in its cycle, pinned to a generation this process never compiled: the pool now", node(web, "web/7/01234567"), true, v2.Policy},
		{"in its cycle, pinned to a policy that is gone", node(web, "db/1/76543210"), true, flags},
		{"a pin out of its cycle is not read", node(nil, "web/1/01234567"), false, flags},
	} {
		if got := r.For(c.n, c.inCycle); got != c.want {
			t.Errorf("%s: got %p, want %p", c.name, got, c.want)
		}
	}
	if got := r.ByPin(""); got != flags {
		t.Errorf("ByPin(\"\"): not the flags'")
	}
	if Pin(v1.Admission) != "web/1/01234567" || Pin(nil) != "" {
		t.Errorf("Pin: %q", Pin(v1.Admission))
	}
}

func ptr[T any](v T) *T { return &v }

// The flags' blockers, all from one builder, in the order their verdicts are read: alerts, health
// checks, pods on the node, pods in the cluster, min-ready, the steering-label conflict; one REST
// mapper and one pod informer however many ask. Without a dynamic client health checks are refused.
func TestFlagsBlockers(t *testing.T) {
	s := policy.Defaults()
	s.Alerts.PrometheusURL = "http://prometheus:9090"
	s.HealthChecks = []string{"deployments.apps/web@shop: object.status.availableReplicas >= object.spec.replicas"}
	s.BlockingPodSelectors = []string{"app=backup"}
	s.BlockingPodSelectorsInCluster = []string{"app=migration"}
	s.MinReadyNodes = "2"
	s.Steering.PreLabels = []string{"maintenance=true"}
	p := policy.MustCompile(s)
	client := fake.NewSimpleClientset()
	b := &Blockers{Client: client, Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), Nodes: func() []*corev1.Node { return nil },
		WaitsUnder: func(*corev1.Node) *policy.Policy { return p }, OnChange: func() {}}
	bs, err := b.Flags(p)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range bs {
		names = append(names, x.Name())
	}
	want := []string{"prometheus-alerts", "health", "pods-on-node", "pods-in-cluster", "min-ready-nodes", "steering-label"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("blockers %v, want %v", names, want)
	}
	pods, mapper := b.pods, b.mapper
	pool := &policy.Pool{Name: "web", HealthChecks: p.HealthChecks, PodSelectors: []string{"app=db"}, Policy: p}
	if _, err := b.Pool(pool); err != nil {
		t.Fatal(err)
	}
	if b.pods != pods || b.mapper != mapper || pods == nil || mapper == nil {
		t.Errorf("a pool's blockers made a second pod informer or REST mapper")
	}
	b.Dynamic = nil
	if _, err := b.Pool(pool); err == nil || !strings.Contains(err.Error(), "dynamic client") {
		t.Errorf("health checks without a dynamic client: %v", err)
	}
}
