package fence

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestCheck(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	lease := func(holder string, renewedAgo time.Duration, transitions int32) *coordinationv1.Lease {
		d := int32(15)
		rt := metav1.NewMicroTime(now.Add(-renewedAgo))
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &rt, LeaseTransitions: &transitions}}
	}
	l := &Lease{Namespace: "ns", Name: "lease", Identity: "op-a", Margin: 5 * time.Second, Now: func() time.Time { return now }}
	cases := []struct {
		name    string
		lease   *coordinationv1.Lease
		term    string
		refused string
	}{
		{"held, fresh", lease("op-a", 2*time.Second, 3), "op-a/3", ""},
		{"held, 6s left", lease("op-a", 9*time.Second, 3), "op-a/3", ""},
		{"held, 4s left", lease("op-a", 11*time.Second, 3), "", "runs out in 4s"},
		{"held, expired", lease("op-a", 20*time.Second, 3), "", "runs out in -5s"},
		{"held by another", lease("op-b", 0, 4), "", `held by "op-b"`},
		{"held by nobody", lease("", 0, 4), "", `held by ""`},
		{"no renew time", &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: strPtr("op-a")}}, "", "no renewTime"},
	}
	for _, c := range cases {
		term, err := l.check(c.lease)
		if c.refused != "" {
			if err == nil || !strings.Contains(err.Error(), c.refused) {
				t.Errorf("%s: got %+v, %v; want refusal containing %q", c.name, term, err, c.refused)
			}
			continue
		}
		if err != nil || term.Name != c.term {
			t.Errorf("%s: got %+v, %v; want term %q", c.name, term, err, c.term)
		}
		if want := c.lease.Spec.RenewTime.Add(15*time.Second - l.Margin/2); !term.Deadline.Equal(want) {
			t.Errorf("%s: deadline %s, want %s", c.name, term.Deadline, want)
		}
	}
}

func strPtr(s string) *string { return &s }

// One read serves admissions while the lease it showed has Margin left; then the Lease is read again,
// and a refusal (another holder) is never served from the cache.
func TestCheckReusesAReadUntilItCouldRunOut(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	d, tr := int32(15), int32(2)
	holder := "op-a"
	renewed := metav1.NewMicroTime(now.Add(-time.Second))
	client := fake.NewSimpleClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &renewed, LeaseTransitions: &tr}})
	gets := 0
	client.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) { gets++; return false, nil, nil })
	l := &Lease{Client: client.CoordinationV1(), Namespace: "ns", Name: "lease", Identity: "op-a", Margin: 5 * time.Second, Now: func() time.Time { return now }}
	ctx := context.Background()
	// Renewed 1 s ago, 15 s lease: it could be taken over in 14 s; reads serve until 5 s before that.
	for _, at := range []time.Duration{0, 3 * time.Second, 8900 * time.Millisecond} {
		now = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC).Add(at)
		term, err := l.Check(ctx)
		if err != nil || term.Name != "op-a/2" {
			t.Fatalf("at +%s: %+v, %v", at, term, err)
		}
	}
	if gets != 1 {
		t.Errorf("three admissions within one read's reach made %d Lease reads, want 1", gets)
	}
	// Past it: read again; meanwhile another instance took over (the lease was not renewed by us).
	now = now.Add(200 * time.Millisecond)
	other := "op-b"
	lease, _ := client.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	gets--
	lease.Spec.HolderIdentity = &other
	if _, err := client.CoordinationV1().Leases("ns").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := l.Check(ctx); err == nil || !strings.Contains(err.Error(), `held by "op-b"`) {
			t.Fatalf("after the read ran out, a lease held by another must refuse: %v", err)
		}
	}
	if gets != 3 {
		t.Errorf("Lease reads %d, want 3 (a refusal is never cached)", gets)
	}
}
