package policy

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/slipway-dev/slipway/api/v1alpha1"
)

func rp(name string, prio int32, sel map[string]string, edit func(*v1alpha1.RebootPolicySpec)) *v1alpha1.RebootPolicy {
	r := &v1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 3},
		Spec: v1alpha1.RebootPolicySpec{NodeSelector: metav1.LabelSelector{MatchLabels: sel}, Priority: prio}}
	if edit != nil {
		edit(&r.Spec)
	}
	return r
}

func ptr[T any](v T) *T { return &v }

// A field the policy leaves out is the flags'; one it sets replaces the flags' (its windows replace
// FLUO's window too).
func TestMerge(t *testing.T) {
	def := Defaults()
	def.Windows, def.FLUOWindow = []string{"Mon-Fri 22:00-05:00"}, FLUOWindow{Start: "Thu 14:00", Length: "1h", TimeZone: "UTC"}
	def.Exclusions, def.Canary = []string{"2026-12-24/2026-12-26"}, Canary{Nodes: 1, Bake: metav1.Duration{Duration: time.Hour}, MaxFailedPerVersion: 2}
	got := MergeSpec(def, v1alpha1.RebootPolicySpec{})
	if fmt.Sprint(got) != fmt.Sprint(def) {
		t.Errorf("an empty policy changed the flags' spec: %+v", got)
	}
	got = MergeSpec(def, v1alpha1.RebootPolicySpec{Windows: []string{"Sun 02:00-06:00"}, Exclusions: []string{"2026-12-31"},
		Canary: &v1alpha1.Canary{Nodes: ptr(int32(3))}})
	// Its windows replace the flags'; its freezes add to the flags' (a pool cannot lift a freeze).
	if strings.Join(got.Windows, ";") != "Sun 02:00-06:00" || got.FLUOWindow != (FLUOWindow{}) || strings.Join(got.Exclusions, ";") != "2026-12-24/2026-12-26;2026-12-31" ||
		got.Canary.Nodes != 3 || got.Canary.Bake.Duration != time.Hour || got.Canary.MaxFailedPerVersion != 2 {
		t.Errorf("merged %+v", got)
	}
	if strings.Join(def.Windows, ";") != "Mon-Fri 22:00-05:00" {
		t.Error("Merge changed the flags' spec")
	}
	// Update: each field the policy sets replaces the flags' ("" too: leave the key as each node has
	// it); the flags' --allow-http-update-server stays the fleet's.
	def.Update = Update{Group: "stable", Server: "https://a.example/", AllowHTTP: true}
	got = MergeSpec(def, v1alpha1.RebootPolicySpec{Update: &v1alpha1.Update{Group: ptr("beta")}})
	if !reflect.DeepEqual(got.Update, Update{Group: "beta", Server: "https://a.example/", AllowHTTP: true}) {
		t.Errorf("merged update %+v", got.Update)
	}
	got = MergeSpec(def, v1alpha1.RebootPolicySpec{Update: &v1alpha1.Update{Server: ptr("")}})
	if !reflect.DeepEqual(got.Update, Update{Group: "stable", AllowHTTP: true}) {
		t.Errorf("merged update %+v", got.Update)
	}
	def.Update.AllowHTTP = false
	if p := CompilePool(def, rp("h", 0, map[string]string{"a": "b"}, func(s *v1alpha1.RebootPolicySpec) {
		s.Update = &v1alpha1.Update{Server: ptr("http://n.example/")}
	})); p.Err == "" {
		t.Error("http server accepted without --allow-http-update-server")
	}
	def.Update.AllowServers = []string{"https://nebraska.example/"}
	if p := CompilePool(def, rp("h", 0, map[string]string{"a": "b"}, func(s *v1alpha1.RebootPolicySpec) {
		s.Update = &v1alpha1.Update{Server: ptr("https://evil.example/v1/update/")}
	})); !strings.Contains(p.Err, "not under any --update-server-allow") {
		t.Errorf("a server outside --update-server-allow: %q", p.Err)
	}
	if p := CompilePool(def, rp("h", 0, map[string]string{"a": "b"}, func(s *v1alpha1.RebootPolicySpec) {
		s.Update = &v1alpha1.Update{Server: ptr("https://nebraska.example/v1/update/")}
	})); p.Err != "" {
		t.Errorf("a server under --update-server-allow: %q", p.Err)
	}
	def.Update.AllowServers = nil
	def.Update.AllowHTTP = true
	if p := CompilePool(def, rp("h", 0, map[string]string{"a": "b"}, func(s *v1alpha1.RebootPolicySpec) {
		s.Update = &v1alpha1.Update{Server: ptr("http://n.example/")}
	})); p.Err != "" || p.Policy.Update.Server != "http://n.example/" {
		t.Errorf("http server with --allow-http-update-server: %q", p.Err)
	}
}

// A spec the schema accepts but the parsers refuse compiles to a pool that says why and holds its
// nodes; a good one compiles with its budget, pause and canaries.
func TestCompile(t *testing.T) {
	def := Defaults()
	good := CompilePool(def, rp("gpu", 10, map[string]string{"gpu": "true"}, func(s *v1alpha1.RebootPolicySpec) {
		s.MaxUnavailable, s.Paused, s.PausedReason = ptr(intstr.FromString("50%")), true, "driver rollout"
		s.Windows = []string{"Sun 02:00-06:00 Europe/Berlin"}
		s.Canary = &v1alpha1.Canary{Nodes: ptr(int32(1)), Bake: &metav1.Duration{Duration: time.Hour}}
	}))
	if good.Err != "" || good.Policy == nil || good.Max == nil || good.Max.Limit(4) != 2 {
		t.Fatalf("good policy: %+v", good)
	}
	if a := good.Admission; a.Name != "gpu" || a.Generation != 3 || a.Invalid != "" || a.Paused != "policy gpu paused: driver rollout" ||
		a.Schedule == nil || a.Canary.Nodes != 1 || a.Canary.Bake != time.Hour {
		t.Errorf("admission policy %+v", a)
	}
	for _, c := range []struct {
		name string
		edit func(*v1alpha1.RebootPolicySpec)
		want string
	}{
		{"bad window", func(s *v1alpha1.RebootPolicySpec) { s.Windows = []string{"Moonday 02:00-06:00"} }, "reboot-window:"},
		{"bad exclusion", func(s *v1alpha1.RebootPolicySpec) { s.Exclusions = []string{"2026-02-30"} }, "reboot-exclusion:"},
		{"zero budget", func(s *v1alpha1.RebootPolicySpec) { s.MaxUnavailable = ptr(intstr.FromInt32(0)) }, "maxUnavailable"},
		{"bad percentage", func(s *v1alpha1.RebootPolicySpec) { s.MaxUnavailable = ptr(intstr.FromString("lots")) }, "maxUnavailable"},
		{"bad selector", func(s *v1alpha1.RebootPolicySpec) {
			s.NodeSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Sometimes"}}}
		}, "nodeSelector"},
		{"empty selector", func(s *v1alpha1.RebootPolicySpec) { s.NodeSelector = metav1.LabelSelector{} }, "nodeSelector is empty"},
		{"selector on a key the agent writes", func(s *v1alpha1.RebootPolicySpec) {
			s.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{"flatcar-linux-update.v1.flatcar-linux.net/group": "stable"}}
		}, "a node could choose its own policy"},
		{"bad health check", func(s *v1alpha1.RebootPolicySpec) {
			s.HealthChecks = []string{"deployments.apps/web@shop: object.status.("}
		}, "healthChecks:"},
		{"bad pod selector", func(s *v1alpha1.RebootPolicySpec) { s.BlockingPodSelectors = []string{"a in (b"} }, "blockingPodSelectors:"},
		{"bake without nodes", func(s *v1alpha1.RebootPolicySpec) {
			s.Canary = &v1alpha1.Canary{Bake: &metav1.Duration{Duration: time.Hour}}
		}, "canary-bake needs"},
		{"http update server", func(s *v1alpha1.RebootPolicySpec) {
			s.Update = &v1alpha1.Update{Server: ptr("http://nebraska.example/v1/update/")}
		}, "plain http is refused"},
		{"update group with a newline", func(s *v1alpha1.RebootPolicySpec) { s.Update = &v1alpha1.Update{Group: ptr("beta\nSERVER=x")} }, "update-group"},
	} {
		p := CompilePool(def, rp("x", 0, map[string]string{"a": "b"}, c.edit))
		if !strings.Contains(p.Err, c.want) || p.Policy != nil || p.Admission.Invalid != p.Err || p.Admission.Name != "x" {
			t.Errorf("%s: %+v, want an error naming %q", c.name, p, c.want)
		}
	}
}

// Known answers: the highest priority wins; two at the highest tie (named); a tie below the winner
// does not matter; a broken selector matches nothing.
func TestSelect(t *testing.T) {
	def := Defaults()
	s := NewPoolSet([]*Pool{
		CompilePool(def, rp("workers", 0, map[string]string{"role": "worker"}, nil)),
		CompilePool(def, rp("gpu", 10, map[string]string{"gpu": "true"}, nil)),
		CompilePool(def, rp("gpu-b", 10, map[string]string{"gpu": "true", "zone": "b"}, nil)),
		CompilePool(def, rp("db", 5, map[string]string{"role": "db"}, nil)),
		CompilePool(def, rp("db2", 5, map[string]string{"role": "db"}, nil)),
		CompilePool(def, rp("broken", 99, nil, func(s *v1alpha1.RebootPolicySpec) {
			s.NodeSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Sometimes"}}}
		})),
	})
	for _, c := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"role": "worker"}, "workers"},
		{map[string]string{"role": "worker", "gpu": "true"}, "gpu"},
		{map[string]string{"role": "worker", "gpu": "true", "zone": "b"}, "tie gpu, gpu-b"},
		{map[string]string{"role": "db"}, "tie db, db2"},
		{map[string]string{"role": "db", "gpu": "true"}, "gpu"}, // the db tie is below gpu
		{map[string]string{"role": "web"}, ""},
		{nil, ""},
	} {
		name, tied := s.Select(labels.Set(c.labels))
		got := name
		if len(tied) > 0 {
			got = "tie " + strings.Join(tied, ", ")
		}
		if got != c.want {
			t.Errorf("%v: %q, want %q", c.labels, got, c.want)
		}
	}
	if name, tied := (*PoolSet)(nil).Select(labels.Set{"a": "b"}); name != "" || tied != nil {
		t.Error("no policies: a node is the default policy's")
	}
}

// Property: for random policies and nodes, Select returns a matching policy that no other matching
// policy outranks, or names every policy that ties at the highest matching priority, or "" when none
// matches.
func TestSelectProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	def := Defaults()
	keys := []string{"a", "b", "c"}
	for round := 0; round < 300; round++ {
		var ps []*Pool
		for i := range rng.Intn(6) {
			sel := map[string]string{keys[rng.Intn(3)]: fmt.Sprint(rng.Intn(2))}
			ps = append(ps, CompilePool(def, rp(fmt.Sprintf("p%d", i), int32(rng.Intn(3)), sel, nil)))
		}
		s := NewPoolSet(ps)
		for range 20 {
			l := labels.Set{}
			for _, k := range keys {
				if rng.Intn(3) > 0 {
					l[k] = fmt.Sprint(rng.Intn(2))
				}
			}
			best, want := int32(-1), []string{}
			for _, p := range ps {
				if p.Selector.Matches(l) && p.Priority > best {
					best = p.Priority
				}
			}
			for _, p := range ps {
				if p.Selector.Matches(l) && p.Priority == best {
					want = append(want, p.Name)
				}
			}
			name, tied := s.Select(l)
			switch {
			case len(want) == 0 && (name != "" || tied != nil):
				t.Fatalf("%v: none matches, got %q %v", l, name, tied)
			case len(want) == 1 && (name != want[0] || tied != nil):
				t.Fatalf("%v: want %s, got %q %v", l, want[0], name, tied)
			case len(want) > 1 && (name != "" || len(tied) != len(want)):
				t.Fatalf("%v: want a tie of %v, got %q %v", l, want, name, tied)
			}
		}
	}
}
