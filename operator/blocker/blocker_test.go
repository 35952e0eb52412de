package blocker

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestCheckAllKeepsOrderAndFailsClosedOnPanic(t *testing.T) {
	open := Func{N: "open", F: func(context.Context, *corev1.Node) (bool, string) { return false, "" }}
	shut := Func{N: "shut", Fleet: true, F: func(context.Context, *corev1.Node) (bool, string) { return true, "closed for lunch" }}
	boom := Func{N: "boom", F: func(_ context.Context, n *corev1.Node) (bool, string) { return n.Labels["x"] == "", "unreached" }}
	got := CheckAll(context.Background(), []Blocker{boom, open, shut}, nil)
	if len(got) != 2 || got[0].Name != "boom" || got[1] != (Result{"shut", "closed for lunch"}) {
		t.Fatalf("CheckAll = %+v", got)
	}
	if !strings.HasPrefix(got[0].Reason, "check failed: panic: ") || !strings.Contains(got[0].Reason, "nil pointer") {
		t.Errorf("panic reason = %q", got[0].Reason)
	}
	if s := got[1].String(); s != "shut: closed for lunch" {
		t.Errorf("String() = %q", s)
	}
	if got := CheckAll(context.Background(), []Blocker{open}, node("a")); got != nil {
		t.Errorf("nothing blocks, got %+v", got)
	}
}

func TestSplit(t *testing.T) {
	a := Func{N: "a", Fleet: true}
	b := Func{N: "b"}
	c := &MinReady{}
	d := &Alerts{}
	e := &Pods{onNode: true}
	f := &Pods{}
	fleet, per := Split([]Blocker{a, b, c, d, e, f})
	names := func(bs []Blocker) (out []string) {
		for _, b := range bs {
			out = append(out, b.Name())
		}
		return out
	}
	if got, want := names(fleet), []string{"a", NameAlerts, NamePodsInCluster}; !reflect.DeepEqual(got, want) {
		t.Errorf("fleet-wide = %v, want %v", got, want)
	}
	if got, want := names(per), []string{"b", NameMinReadyNodes, NamePodsOnNode}; !reflect.DeepEqual(got, want) {
		t.Errorf("per node = %v, want %v", got, want)
	}
}

func TestNameListAndShorten(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"a"}, "a"},
		{[]string{"a", "b", "c"}, "a, b, c"},
		{[]string{"a", "b", "c", "d", "e"}, "a, b, c (+2 more)"},
	} {
		if got := nameList(c.in); got != c.want {
			t.Errorf("nameList(%v) = %q, want %q", c.in, got, c.want)
		}
	}
	long := strings.Repeat("é", 200) // 400 bytes
	s := shorten(long)
	if len(s) > maxReasonLength || !strings.HasSuffix(s, "...") || !strings.HasPrefix(long, strings.TrimSuffix(s, "...")) {
		t.Errorf("shorten: %d bytes %q", len(s), s)
	}
	if shorten("short") != "short" {
		t.Error("shorten changed a short reason")
	}
}
