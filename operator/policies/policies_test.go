package policies

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

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
