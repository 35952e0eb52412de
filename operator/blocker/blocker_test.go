package blocker

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/operator/admission"
)

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestSplit(t *testing.T) {
	a := admission.Func{N: "a", Fleet: true}
	b := admission.Func{N: "b"}
	c := &MinReady{}
	d := &Alerts{}
	e := &Pods{onNode: true}
	f := &Pods{}
	fleet, per := admission.Split([]admission.Blocker{a, b, c, d, e, f})
	names := func(bs []admission.Blocker) (out []string) {
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
