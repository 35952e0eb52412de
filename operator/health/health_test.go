package health

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestParse(t *testing.T) {
	c, err := Parse(`deployments.apps/web@shop: object.status.availableReplicas >= object.spec.replicas`)
	if err != nil {
		t.Fatal(err)
	}
	if c.Resource != (schema.GroupResource{Group: "apps", Resource: "deployments"}) || c.Name != "web" || c.Namespace != "shop" || c.Object() != "deployments.apps/web@shop" {
		t.Errorf("parsed %+v", c)
	}
	for spec, want := range map[string]string{
		`cephclusters.ceph.rook.io/rook-ceph@rook-ceph: object.status.ceph.health == "HEALTH_OK"`: "cephclusters.ceph.rook.io/rook-ceph@rook-ceph",
		`nodes/worker-1: object.spec.unschedulable != true`:                                       "nodes/worker-1",
		`configmaps/gate@ops: object.data.open == 'yes' && object.data.exists(k, k == 'open')`:    "configmaps/gate@ops",
		// as deploy/health-check writes it: a word per part, spaces between (the core group empty)
		`deployments . apps / web @ shop : object.status.availableReplicas >= 2`: "deployments.apps/web@shop",
		`configmaps .  / gate @ ops : object.data.open == 'yes'`:                 "configmaps/gate@ops",
	} {
		c, err := Parse(spec)
		if err != nil || c.Object() != want {
			t.Errorf("%s: %v %v", spec, c, err)
		}
	}
	for spec, want := range map[string]string{
		`deployments.apps/web@shop`:                             "want \"RESOURCE.GROUP/NAME[@NAMESPACE]: CEL\"",
		`deployments.apps/web@shop:   `:                         "want \"RESOURCE.GROUP/NAME[@NAMESPACE]: CEL\"",
		`web: true`:                                             "object \"web\"",
		`Deployments.apps/web: true`:                            "resource \"Deployments.apps\"",
		`deployments.apps/Web: true`:                            "name \"Web\"",
		`deployments.apps/web@Shop: true`:                       "namespace \"Shop\"",
		`deployments.apps/web@shop: object.status.(`:            "expression:",
		`deployments.apps/web@shop: object.status.ready`:        "", // dyn: checked when evaluated
		`deployments.apps/web@shop: object.status.replicas + 1`: "evaluates to int, want bool",
		`deployments.apps/web@shop: 1 + 1`:                      "evaluates to int, want bool",
		`deployments.apps/web@shop: "a"`:                        "evaluates to string, want bool",
		`deployments.apps/web@shop: nosuchvar.status`:           "undeclared reference",
		`deployments.apps/web@shop: object.status.matches(1)`:   "expression:",
	} {
		_, err := Parse(spec)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", spec, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to say %q", spec, err, want)
		}
	}
}

func deployment(available any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop"},
		"spec":     map[string]any{"replicas": int64(3)},
		"status":   map[string]any{},
	}}
	if available != nil {
		u.Object["status"] = map[string]any{"availableReplicas": available}
	}
	return u
}

// The blocker fails closed: every way of not knowing blocks, with the reason.
func TestBlockerFailsClosed(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	check := func(spec string, objs ...runtime.Object) (bool, string) {
		t.Helper()
		c, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "DeploymentList"}, objs...)
		b := &Blocker{Checks: []*Check{c}, Client: client, Mapper: resettable{mapper}}
		return b.Check(context.Background(), nil)
	}
	const ok = `deployments.apps/web@shop: object.status.availableReplicas >= object.spec.replicas`
	for _, c := range []struct {
		name, spec string
		objs       []runtime.Object
		blocked    bool
		why        string
	}{
		{"healthy", ok, []runtime.Object{deployment(int64(3))}, false, ""},
		{"short", ok, []runtime.Object{deployment(int64(2))}, true, "deployments.apps/web@shop: object.status.availableReplicas >= object.spec.replicas is false"},
		{"missing object", ok, nil, true, "deployments.apps/web@shop: not found"},
		{"no such field yet", ok, []runtime.Object{deployment(nil)}, true, "evaluation error (no such key)"},
		{"not a bool", `deployments.apps/web@shop: object.spec.replicas`, []runtime.Object{deployment(int64(3))}, true, "evaluates to a int, want bool"},
		{"unknown resource", `widgets.example.com/w: true`, nil, true, "widgets.example.com/w: no such resource in the cluster"},
	} {
		blocked, why := check(c.spec, c.objs...)
		if blocked != c.blocked || !strings.Contains(why, c.why) {
			t.Errorf("%s: blocked=%v %q, want %v %q", c.name, blocked, why, c.blocked, c.why)
		}
	}
	// RBAC refusal.
	c, _ := Parse(ok)
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "DeploymentList"})
	client.PrependReactor("get", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(gvr.GroupResource(), "web", nil)
	})
	b := &Blocker{Checks: []*Check{c}, Client: client, Mapper: resettable{mapper}}
	if blocked, why := b.Check(context.Background(), nil); !blocked || !strings.Contains(why, "may not read it (RBAC: get deployments.apps)") {
		t.Errorf("forbidden: %v %q", blocked, why)
	}
}

type resettable struct{ meta.RESTMapper }

func (resettable) Reset() {}

// counting counts Resets.
type counting struct {
	meta.RESTMapper
	resets int
}

func (c *counting) Reset() { c.resets++ }

// A check of a resource the cluster does not serve rediscovers the API at most once a minute, not on
// every evaluation (TTL 0 here: every call evaluates).
func TestUnknownResourceResetsDiscoveryOncePerMinute(t *testing.T) {
	c, err := Parse(`widgets.example.com/w: true`)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	m := &counting{RESTMapper: meta.NewDefaultRESTMapper(nil)}
	b := &Blocker{Checks: []*Check{c}, Client: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), Mapper: m, TTL: time.Nanosecond, Now: func() time.Time { return now }}
	for i := 0; i < 10; i++ {
		now = now.Add(time.Second)
		if blocked, why := b.Check(context.Background(), nil); !blocked || !strings.Contains(why, "no such resource") {
			t.Fatalf("%v %q", blocked, why)
		}
	}
	if m.resets != 1 {
		t.Errorf("%d discoveries in 10 s, want 1", m.resets)
	}
	now = now.Add(ResetEvery)
	b.Check(context.Background(), nil)
	if m.resets != 2 {
		t.Errorf("%d discoveries after a minute more, want 2", m.resets)
	}
}

// What a check says when it does not hold never carries the object's values: blocked-by is readable by
// every agent, and a Secret or a ConfigMap may be what a check reads. Every runtime error form cel-go
// and the Kubernetes libraries produce is said by its kind; the full text (which does carry the value:
// the test checks that too, so the forms are real) is the detail for the operator's debug log only.
func TestJudgeNeverQuotesTheObject(t *testing.T) {
	ctx := context.Background()
	const secret = "s3cr3t-db-password"
	obj := map[string]any{
		"data": map[string]any{"token": secret, "n": "12", "zero": int64(0), "big": int64(9223372036854775807)},
		"spec": map[string]any{"containers": []any{map[string]any{"env": []any{map[string]any{"value": secret}}}}},
	}
	for _, c := range []struct {
		expr, want string
		leaks      bool // the raw error quotes the secret (proves the form is one that would leak)
	}{
		{`{}[object.spec.containers[0].env[0].value] == 'x'`, "evaluation error (no such key)", true},
		{`{'a': 1}[object.data.token] == 1`, "evaluation error (no such key)", true},
		{`int(object.data.token) > 0`, "evaluation error (conversion error)", false},
		{`ip(object.data.token).family() == 4`, "evaluation error (invalid argument)", true},
		{`url(object.data.token).getHost() == ''`, "evaluation error", false},
		{`quantity(object.data.token).isInteger()`, "evaluation error", false},
		{`duration(object.data.token) > duration('1s')`, "evaluation error", false},
		{`timestamp(object.data.token) > timestamp('2020-01-01T00:00:00Z')`, "evaluation error", false},
		{`object.data.token.matches(object.data.token + '[')`, "evaluation error", false},
		{`dyn(object.data.token) + 1 == 2`, "evaluation error (no matching overload)", false},
		{`10 / object.data.zero == 1`, "evaluation error (division by zero)", false},
		{`10 % object.data.zero == 1`, "evaluation error (modulus by zero)", false},
		{`object.data.big + 1 > 0`, "evaluation error (overflow)", false},
		{`object.spec.containers[5].env[0].value == 'x'`, "evaluation error (index out of range)", false},
		{`object.data.missing == 'open'`, "evaluation error (no such key)", false},
		{`['a','b','s'].size() > 0 && {'': true}[object.data.token.substring(0, 1)]`, "evaluation error (no such key)", false}, // a key that is one of the expression's words
		{`object.data[object.data.token] == 'open'`, "evaluation error (no such key)", true},
		{`object.data.token == 'open'`, "object.data.token == 'open' is false", false},
		{`int(object.data.n) > 10`, "", false},
	} {
		ch, err := Parse("configmaps/gate@ops: " + c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		got, detail := ch.judge(ctx, obj)
		if strings.Contains(got, "s3cr3t") {
			t.Errorf("%s: the reason quotes the object: %q", c.expr, got)
		}
		if c.want == "" {
			if got != "" {
				t.Errorf("%s: %q, want it to hold", c.expr, got)
			}
			continue
		}
		if !strings.HasPrefix(got, c.expr+": "+c.want) && got != c.want {
			t.Errorf("%s: %q, want %q", c.expr, got, c.expr+": "+c.want)
		}
		if c.leaks && (detail == nil || !strings.Contains(detail.Error(), secret)) {
			t.Errorf("%s: the raw error %v does not carry the value: not the leaking form this case is for", c.expr, detail)
		}
	}
}

// One answer serves every decision for TTL: a burst of waiting nodes costs one GET per check, and a
// change of the object is seen once the TTL has passed.
func TestBlockerReusesItsAnswerForTTL(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	c, err := Parse(`deployments.apps/web@shop: object.status.availableReplicas >= object.spec.replicas`)
	if err != nil {
		t.Fatal(err)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "DeploymentList"}, deployment(int64(2)))
	gets := 0
	client.PrependReactor("get", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return false, nil, nil
	})
	now := time.Unix(1000, 0)
	b := &Blocker{Checks: []*Check{c}, Client: client, Mapper: resettable{mapper}, TTL: 2 * time.Second, Now: func() time.Time { return now }}
	for i := 0; i < 50; i++ {
		if blocked, _ := b.Check(context.Background(), nil); !blocked {
			t.Fatal("short deployment not blocking")
		}
	}
	if gets != 1 {
		t.Errorf("50 decisions within the TTL cost %d GETs, want 1", gets)
	}
	now = now.Add(2 * time.Second)
	b.Check(context.Background(), nil)
	if gets != 2 {
		t.Errorf("after the TTL: %d GETs, want 2", gets)
	}
}
