package blocker

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseMinReadyNodes(t *testing.T) {
	for _, c := range []struct {
		in    string
		total int
		want  int
	}{
		{"0", 5, 0}, {"3", 5, 3}, {"3", 2, 3}, {"60%", 5, 3}, {"50%", 5, 3}, {"50%", 4, 2},
		{"1%", 200, 2}, {"1%", 1, 1}, {"0%", 9, 0}, {"100%", 7, 7}, {" 2 ", 9, 2}, {"10%", 0, 0},
	} {
		m, err := ParseMinReadyNodes(c.in)
		if err != nil {
			t.Fatalf("ParseMinReadyNodes(%q): %v", c.in, err)
		}
		if got := m.Of(c.total); got != c.want {
			t.Errorf("ParseMinReadyNodes(%q).Of(%d) = %d, want %d", c.in, c.total, got, c.want)
		}
	}
	for _, bad := range []string{"", "-1", "101%", "abc", "1.5", "%", "3 nodes"} {
		if _, err := ParseMinReadyNodes(bad); err == nil {
			t.Errorf("ParseMinReadyNodes(%q) accepted", bad)
		}
	}
}

// fleetNode: ready and cordoned as given.
func fleetNode(name string, ready, cordoned bool) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Unschedulable: cordoned},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}},
	}
}

func TestMinReadyKnownAnswers(t *testing.T) {
	// a..c Ready, d NotReady, e cordoned: 3 of 5 available.
	fleet := []*corev1.Node{
		fleetNode("a", true, false), fleetNode("b", true, false), fleetNode("c", true, false),
		fleetNode("d", false, false), fleetNode("e", true, true),
	}
	list := func() ([]*corev1.Node, error) { return fleet, nil }
	cases := []struct {
		min    string
		node   string
		reason string // "" = admitted
	}{
		{"2", "a", ""}, // b, c stay
		{"3", "a", "admitting a would leave 2 of 5 nodes Ready and schedulable, fewer than min-ready-nodes=3 (3)"},
		{"3", "d", ""}, // d is down already: a, b, c stay
		{"3", "e", ""},
		{"4", "d", "admitting d would leave 3 of 5 nodes Ready and schedulable, fewer than min-ready-nodes=4 (4)"},
		{"40%", "a", ""}, // 2 of 5
		{"50%", "a", "admitting a would leave 2 of 5 nodes Ready and schedulable, fewer than min-ready-nodes=50% (3)"},
		{"0", "a", ""},
		{"5", "x", "admitting x would leave 3 of 5 nodes Ready and schedulable, fewer than min-ready-nodes=5 (5)"}, // unknown node
	}
	for _, c := range cases {
		m, err := ParseMinReadyNodes(c.min)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewMinReady(m, list, nil)
		if err != nil {
			t.Fatal(err)
		}
		blocked, reason := b.Check(context.Background(), node(c.node))
		if blocked != (c.reason != "") || reason != c.reason {
			t.Errorf("min %s, node %s: got (%v, %q), want reason %q", c.min, c.node, blocked, reason, c.reason)
		}
	}
}

func TestMinReadyUsesTheControllersNotionAndFailsClosed(t *testing.T) {
	fleet := []*corev1.Node{fleetNode("a", true, false), fleetNode("b", true, false), fleetNode("c", true, false)}
	m, _ := ParseMinReadyNodes("2")
	// b was just admitted: Ready and schedulable still, but the controller counts it as going down.
	inCycle := func(n *corev1.Node) bool { return n.Name == "b" || NotAvailable(n) }
	b, _ := NewMinReady(m, func() ([]*corev1.Node, error) { return fleet, nil }, inCycle)
	if blocked, reason := b.Check(context.Background(), node("a")); !blocked {
		t.Errorf("a admitted although b is in its cycle (%q)", reason)
	}
	failing, _ := NewMinReady(m, func() ([]*corev1.Node, error) { return nil, errors.New("lister gone") }, nil)
	if blocked, reason := failing.Check(context.Background(), node("a")); !blocked || reason != "check failed: listing nodes: lister gone" {
		t.Errorf("list error: got (%v, %q)", blocked, reason)
	}
	if blocked, _ := failing.Check(context.Background(), nil); !blocked {
		t.Error("nil node admitted")
	}
	if _, err := NewMinReady(m, nil, nil); err == nil {
		t.Error("NewMinReady without a node list accepted")
	}
	if !NotAvailable(&corev1.Node{}) {
		t.Error("a node without a Ready condition counts as available")
	}
}
