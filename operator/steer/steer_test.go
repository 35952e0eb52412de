package steer

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
)

func TestParseLabels(t *testing.T) {
	got, err := ParseLabels([]string{"kured=rebooting", "remediation.medik8s.io/exclude-from-remediation-", "example.com/empty="})
	if err != nil {
		t.Fatal(err)
	}
	want := []Label{{Key: "kured", Value: "rebooting"}, {Key: "remediation.medik8s.io/exclude-from-remediation", Remove: true}, {Key: "example.com/empty"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseLabels = %+v, want %+v", got, want)
	}
	for _, c := range []struct{ spec, why string }{
		{"kured", "want KEY=VALUE or KEY-"},
		{"bad key!=x", "not a label key"},
		{"k=bad value", "not a label value"},
		{"=v", "not a label key"},
		{protocol.BeforeReboot + "=true", "written by the operator"},
		{protocol.RebootNeeded + "=true", "written by the agent"},
		{protocol.ExcludeFromLBs + "=true", "--exclude-from-load-balancers"},
	} {
		if _, err := ParseLabels([]string{c.spec}); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParseLabels(%q) = %v, want an error saying %q", c.spec, err, c.why)
		}
	}
	if _, err := ParseLabels([]string{"a=1", "a-"}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a key given twice: %v", err)
	}
	if err := ValidateTaintKey("example.com/reboot pending"); err == nil {
		t.Error("a taint key with a space was accepted")
	}
}

func nodeWith(labels, ann map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, Annotations: ann}, Spec: corev1.NodeSpec{Taints: taints}}
}

var (
	noSchedule = corev1.Taint{Key: "example.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	pending    = corev1.Taint{Key: "example.com/reboot", Effect: corev1.TaintEffectPreferNoSchedule}
	oldPending = corev1.Taint{Key: "example.com/old", Effect: corev1.TaintEffectPreferNoSchedule}
)

func taintsOf(p *nodes.Patch, n *corev1.Node) []corev1.Taint {
	if p.Taints == nil {
		return n.Spec.Taints
	}
	return *p.Taints
}

// The waiting taint: added and marked next to others' taints, removed only when marked, moved when
// the flag's key changed, and someone else's taint of the same key is never touched.
func TestTaint(t *testing.T) {
	c := Config{PreferNoScheduleTaint: pending.Key}
	for _, tc := range []struct {
		name       string
		n          *corev1.Node
		on         bool
		want       []corev1.Taint
		wantMarked string // "" unmarked
	}{
		{"waiting: added after the others", nodeWith(nil, nil, noSchedule), true, []corev1.Taint{noSchedule, pending}, pending.Key},
		{"waiting, already ours: nothing", nodeWith(nil, map[string]string{protocol.PreferNoScheduleTaint: pending.Key}, pending), true, []corev1.Taint{pending}, pending.Key},
		{"waiting, someone else's: left unmarked", nodeWith(nil, nil, pending), true, []corev1.Taint{pending}, ""},
		{"waiting, ours was removed by someone: back", nodeWith(nil, map[string]string{protocol.PreferNoScheduleTaint: pending.Key}), true, []corev1.Taint{pending}, pending.Key},
		{"not waiting: ours removed, others stay", nodeWith(nil, map[string]string{protocol.PreferNoScheduleTaint: pending.Key}, noSchedule, pending), false, []corev1.Taint{noSchedule}, ""},
		{"not waiting, someone else's: stays", nodeWith(nil, nil, pending), false, []corev1.Taint{pending}, ""},
		{"flag changed: the old key's taint goes, the new one comes", nodeWith(nil, map[string]string{protocol.PreferNoScheduleTaint: oldPending.Key}, oldPending, noSchedule), true, []corev1.Taint{noSchedule, pending}, pending.Key},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &nodes.Patch{}
			c.Taint(p, tc.n, tc.on)
			if got := taintsOf(p, tc.n); !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Errorf("taints %v, want %v", got, tc.want)
			}
			marked := tc.n.Annotations[protocol.PreferNoScheduleTaint]
			if v, ok := p.Annotations[protocol.PreferNoScheduleTaint]; ok {
				marked = ""
				if v != nil {
					marked = *v
				}
			}
			if marked != tc.wantMarked {
				t.Errorf("marked %q, want %q", marked, tc.wantMarked)
			}
		})
	}
	// Off (no flag): a marked taint still goes when the node stops waiting; nothing is added.
	p := &nodes.Patch{}
	Config{}.Taint(p, nodeWith(nil, nil, noSchedule), true)
	if !p.Empty() {
		t.Errorf("no flag, yet the patch %s", p)
	}
	Config{}.Taint(p, nodeWith(nil, map[string]string{protocol.PreferNoScheduleTaint: pending.Key}, pending), true)
	if p.Taints == nil || len(*p.Taints) != 0 {
		t.Errorf("flag turned off: the marked taint stays: %s", p)
	}
}

// The cycle's labels: the load-balancer exclusion only when Slipway added it, kured's pre and post
// labels as given (KEY- removes).
func TestAdmitAndEnd(t *testing.T) {
	c := Config{ExcludeFromLoadBalancers: true, PreferNoScheduleTaint: pending.Key,
		Pre:  []Label{{Key: "kured", Value: "rebooting"}, {Key: "nhc/exclude", Value: "true"}},
		Post: []Label{{Key: "kured", Value: "done"}, {Key: "nhc/exclude", Remove: true}}}
	n := nodeWith(map[string]string{"zone": "a"}, map[string]string{protocol.PreferNoScheduleTaint: pending.Key}, pending)
	p := &nodes.Patch{}
	c.Admit(p, n)
	if got := p.String(); got != "annotation "+protocol.LBExcluded+"=true, label kured=rebooting, label nhc/exclude=true, label "+protocol.ExcludeFromLBs+"=true" {
		t.Errorf("admission writes %s", got)
	}
	// As the API server would have it after the admission.
	n.Labels = map[string]string{"zone": "a", "kured": "rebooting", "nhc/exclude": "true", protocol.ExcludeFromLBs: "true"}
	n.Annotations[protocol.LBExcluded] = "true"
	p = &nodes.Patch{}
	c.End(p, n)
	if got := p.String(); got != "-annotation "+protocol.LBExcluded+", -annotation "+protocol.PreferNoScheduleTaint+", -label nhc/exclude, -label "+protocol.ExcludeFromLBs+", label kured=done, spec.taints=[]" {
		t.Errorf("cycle end writes %s", got)
	}
	// Excluded before the cycle (by its owner): neither added nor removed.
	owned := nodeWith(map[string]string{protocol.ExcludeFromLBs: ""}, nil)
	p = &nodes.Patch{}
	Config{ExcludeFromLoadBalancers: true}.Admit(p, owned)
	Config{ExcludeFromLoadBalancers: true}.End(p, owned)
	if !p.Empty() {
		t.Errorf("someone else's exclusion touched: %s", p)
	}
	if got := c.LabelKeys(); !reflect.DeepEqual(got, []string{"kured", "nhc/exclude", protocol.ExcludeFromLBs}) {
		t.Errorf("LabelKeys = %q", got)
	}
}
