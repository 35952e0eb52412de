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
	if got := p.String(); got != "annotation "+protocol.LBExcluded+"=true, annotation "+protocol.SteeringLabels+"=kured=rebooting,nhc/exclude=true, label kured=rebooting, label nhc/exclude=true, label "+protocol.ExcludeFromLBs+"=true" {
		t.Errorf("admission writes %s", got)
	}
	n = applied(n, p) // as the API server has it after the admission
	p = &nodes.Patch{}
	c.End(p, n)
	if got := p.String(); got != "-annotation "+protocol.LBExcluded+", -annotation "+protocol.PreferNoScheduleTaint+", -label nhc/exclude, -label "+protocol.ExcludeFromLBs+", annotation "+protocol.SteeringLabels+"=kured=done, label kured=done, spec.taints=[]" {
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

// applied is n after p, as the API server would have it.
func applied(n *corev1.Node, p *nodes.Patch) *corev1.Node {
	n = n.DeepCopy()
	set := func(m map[string]string, ch map[string]*string) map[string]string {
		if m == nil {
			m = map[string]string{}
		}
		for k, v := range ch {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = *v
			}
		}
		return m
	}
	n.Labels, n.Annotations = set(n.Labels, p.Labels), set(n.Annotations, p.Annotations)
	if p.Taints != nil {
		n.Spec.Taints = *p.Taints
	}
	return n
}

// Steering changes only labels Slipway set (recorded in steering-labels with the value they still
// have): a user's label of a pre- or post-reboot key, there before the cycle or put there during
// it, keeps its value through the cycle and after it. A pre-reboot label that would change one holds
// the node's admission (Conflict: blocked-by steering-label); a post-reboot label that would is left
// out and named (Kept, for the cycle's Event). kured's leftover post-reboot value is taken over: the
// cycle's end writes it back.
func TestLabelsChangeOnlyWhatSlipwaySet(t *testing.T) {
	c := Config{ExcludeFromLoadBalancers: true,
		Pre:  []Label{{Key: "kured", Value: "rebooting"}, {Key: "nhc/exclude", Value: "true"}, {Key: "example.com/ready-", Remove: true}},
		Post: []Label{{Key: "kured", Value: "done"}, {Key: "nhc/exclude", Remove: true}}}
	for _, tc := range []struct {
		name      string
		labels    map[string]string
		ann       map[string]string
		during    map[string]string // labels a person sets during the cycle ("" value: removes)
		conflict  string            // in Conflict's answer ("" none)
		kept      string            // in Kept's answer at the end ("" none)
		wantAfter map[string]string // the steering keys after the cycle (absent: gone)
		again     bool              // the next cycle is held too (conflict != "" implies it)
	}{
		{name: "fresh node: set, recorded, removed by the post KEY-",
			wantAfter: map[string]string{"kured": "done"}},
		{name: "a user's label of a pre key with another value holds the admission",
			labels:   map[string]string{"nhc/exclude": "false"},
			conflict: "nhc/exclude=false (wants nhc/exclude=true)", kept: "nhc/exclude=false (wants nhc/exclude-)",
			wantAfter: map[string]string{"kured": "done", "nhc/exclude": "false"}},
		{name: "a user's label of a pre key with the same value: left, never removed",
			labels: map[string]string{"nhc/exclude": "true"}, kept: "nhc/exclude=true (wants nhc/exclude-)",
			wantAfter: map[string]string{"kured": "done", "nhc/exclude": "true"}},
		{name: "a pre KEY- on a user's label holds the admission (empty value too)",
			labels: map[string]string{"example.com/ready-": ""}, conflict: "example.com/ready-= (wants example.com/ready--)",
			wantAfter: map[string]string{"kured": "done", "example.com/ready-": ""}},
		{name: "kured's leftover post value is taken over",
			labels:    map[string]string{"kured": "done"},
			wantAfter: map[string]string{"kured": "done"}},
		{name: "a user's label of a post key with another value: kept",
			labels: map[string]string{"kured": "mine"}, conflict: "kured=mine (wants kured=rebooting)", kept: "kured=mine (wants kured=done)",
			wantAfter: map[string]string{"kured": "mine"}},
		{name: "a label Slipway set, changed by a user during the cycle, is theirs",
			during: map[string]string{"nhc/exclude": "forever", "kured": "paused-by-ops"},
			kept:   "kured=paused-by-ops (wants kured=done); nhc/exclude=forever (wants nhc/exclude-)", again: true,
			wantAfter: map[string]string{"kured": "paused-by-ops", "nhc/exclude": "forever"}},
		{name: "a recorded value the label no longer has is no record (a forged or stale annotation)",
			labels: map[string]string{"nhc/exclude": "false"}, ann: map[string]string{protocol.SteeringLabels: "nhc/exclude=true"},
			conflict: "nhc/exclude=false", kept: "nhc/exclude=false (wants nhc/exclude-)",
			wantAfter: map[string]string{"kured": "done", "nhc/exclude": "false"}},
		{name: "the user's own load-balancer exclusion value, put there during the cycle, stays",
			during:    map[string]string{protocol.ExcludeFromLBs: "ops"},
			wantAfter: map[string]string{"kured": "done", protocol.ExcludeFromLBs: "ops"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			labels := map[string]string{"zone": "a"}
			for k, v := range tc.labels {
				labels[k] = v
			}
			n := nodeWith(labels, tc.ann)
			got := c.Conflict(n)
			if tc.conflict == "" && got != "" || tc.conflict != "" && !strings.Contains(got, tc.conflict) {
				t.Errorf("Conflict = %q, want %q", got, tc.conflict)
			}
			// Admitted anyway (the blocker raced a person's write): Admit still changes nothing of theirs.
			p := &nodes.Patch{}
			c.Admit(p, n)
			for k := range tc.labels {
				if v, ok := p.Labels[k]; ok && (v == nil || *v != tc.labels[k]) && tc.labels[k] != c.postValues()[k] {
					t.Errorf("admission changes the user's %s=%s: %s", k, tc.labels[k], p)
				}
			}
			n = applied(n, p)
			for k, v := range tc.during {
				n.Labels[k] = v
			}
			if got := strings.Join(c.Kept(n, false), "; "); got != tc.kept {
				t.Errorf("Kept = %q, want %q", got, tc.kept)
			}
			p = &nodes.Patch{}
			c.End(p, n)
			n = applied(n, p)
			for _, k := range []string{"kured", "nhc/exclude", "example.com/ready-", protocol.ExcludeFromLBs} {
				v, ok := n.Labels[k]
				if w, wok := tc.wantAfter[k]; ok != wok || v != w {
					t.Errorf("after the cycle %s=%q (present %v), want %q (present %v); labels %v", k, v, ok, w, wok, n.Labels)
				}
			}
			if n.Labels["zone"] != "a" {
				t.Errorf("an unrelated label changed: %v", n.Labels)
			}
			// What stays recorded is exactly what Slipway set and still has its value.
			if rec := n.Annotations[protocol.SteeringLabels]; rec != "" && rec != "kured="+n.Labels["kured"] {
				t.Errorf("steering-labels after the cycle %q, labels %v", rec, n.Labels)
			}
			// The next cycle: what Slipway left it may change again; the user's labels still hold it.
			if again := c.Conflict(n); (again != "") != (tc.again || tc.conflict != "") {
				t.Errorf("next cycle's Conflict = %q", again)
			}
		})
	}
}
