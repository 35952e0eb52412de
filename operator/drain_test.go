package operator

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/operator/policy"
)

// The settle-pdbs snapshot is read once per cycle, from the pods the cycle's first attempt lists
// before it evicts any: a retried drain keeps it (by then the first attempt's evictions consumed the
// budgets), a new cycle reads it again, and a policy without --settle-pdbs never reads it.
func TestDrainReadsPDBsOncePerCycle(t *testing.T) {
	yes := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "shop",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "db", UID: "u", Controller: &yes}}}, Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	client := fake.NewSimpleClientset(pod) // its discovery offers no Eviction API: every attempt fails after its list
	done := make(chan string, 10)
	spec := fixtureSpec()
	spec.Drain.Timeout = metav1.Duration{Duration: 5 * time.Second}
	dc := policy.MustCompile(spec).Drain
	d := newDrainer(client, dc, klog.Background(), func(n string) { done <- n })
	var asked []int
	d.pdbs = func(node string, pods []corev1.Pod) string {
		asked = append(asked, len(pods))
		return "shop/db=1"
	}
	attempt := func(cycle string, settle bool) drainResult {
		t.Helper()
		if !d.start(context.Background(), "n1", cycle, false, dc, settle) {
			t.Fatal("attempt not started")
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("attempt never finished")
		}
		r, ok := d.result("n1", cycle)
		if !ok {
			t.Fatal("no result")
		}
		return r
	}
	r := attempt("c1", true)
	if r.err == nil || r.pdbs != "shop/db=1" || len(asked) != 1 || asked[0] != 1 {
		t.Fatalf("first attempt: err %v, pdbs %q, asked %v; want a failed attempt that read the PDBs of its 1 pod once", r.err, r.pdbs, asked)
	}
	if r = attempt("c1", true); r.pdbs != "shop/db=1" || len(asked) != 1 {
		t.Fatalf("retry: err %v, pdbs %q, asked %v; want the first attempt's snapshot kept, not read again", r.err, r.pdbs, asked)
	}
	if r = attempt("c2", true); r.pdbs != "shop/db=1" || len(asked) != 2 {
		t.Fatalf("next cycle: pdbs %q, asked %v; want it read again", r.pdbs, asked)
	}
	if r = attempt("c3", false); r.pdbs != "" || len(asked) != 2 {
		t.Fatalf("a policy without settle-pdbs: pdbs %q, asked %v; want none read", r.pdbs, asked)
	}
}
