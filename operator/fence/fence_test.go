package fence

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
