package protocol

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStageSince(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		CycleStarted: "2026-11-23T08:00:00Z",
		DrainStarted: "2026-11-23T08:05:00Z",
		RebootOKTime: "not a time",
	}}}
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	for _, c := range []struct {
		state State
		want  time.Time
	}{
		{BeforeHooks, at("2026-11-23T08:00:00Z")},
		{Draining, at("2026-11-23T08:05:00Z")},
		{Rebooting, time.Time{}}, // malformed reads as unknown
		{Idle, time.Time{}},
		{NeedsReboot, time.Time{}},
	} {
		if got := StageSince(c.state, n); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.state, got, c.want)
		}
	}
}

func TestBudgetGroup(t *testing.T) {
	node := func(labels, ann map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: ann}}
	}
	zone := "topology.kubernetes.io/zone"
	for _, c := range []struct {
		n     *corev1.Node
		label string
		want  string
	}{
		{node(map[string]string{zone: "a"}, map[string]string{FleetLockGroup: "fl"}), zone, "a"}, // the label wins
		{node(nil, map[string]string{FleetLockGroup: "fl"}), zone, "fl"},
		{node(map[string]string{zone: "a"}, nil), "", ""}, // no --group-label: the label means nothing
		{node(nil, nil), zone, ""},
	} {
		if got := BudgetGroup(c.n, c.label); got != c.want {
			t.Errorf("BudgetGroup(%v, %v, %q) = %q, want %q", c.n.Labels, c.n.Annotations, c.label, got, c.want)
		}
	}
}
