package operator_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
)

var crdOnce sync.Once

// needPools is needCluster with the RebootPolicy CRD installed as the installs ship it, and a dynamic
// client; every policy is deleted when the test ends.
func needPools(t *testing.T) dynamic.Interface {
	t.Helper()
	needCluster(t)
	var err error
	crdOnce.Do(func() { err = testenv.InstallCRDs(context.Background(), cp.RestConfig(), "../deploy/base/crd") })
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cp.RestConfig())
	t.Cleanup(func() {
		_ = dyn.Resource(v1alpha1.Resource).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	return dyn
}

func createPolicy(t *testing.T, dyn dynamic.Interface, name string, spec v1alpha1.RebootPolicySpec) {
	t.Helper()
	rp := &v1alpha1.RebootPolicy{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RebootPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(v1alpha1.Resource).Create(context.Background(), &unstructured.Unstructured{Object: u}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating RebootPolicy %s: %v", name, err)
	}
}

func patchPolicy(t *testing.T, dyn dynamic.Interface, name string, patch map[string]interface{}) {
	t.Helper()
	body, _ := json.Marshal(patch)
	if _, err := dyn.Resource(v1alpha1.Resource).Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching RebootPolicy %s: %v", name, err)
	}
}

func getPolicy(t *testing.T, dyn dynamic.Interface, name string) *v1alpha1.RebootPolicy {
	t.Helper()
	u, err := dyn.Resource(v1alpha1.Resource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rp := &v1alpha1.RebootPolicy{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rp); err != nil {
		t.Fatal(err)
	}
	return rp
}

// waitPolicy waits until RebootPolicy name's status satisfies cond.
func waitPolicy(t *testing.T, dyn dynamic.Interface, name, what string, cond func(*v1alpha1.RebootPolicy) bool) *v1alpha1.RebootPolicy {
	t.Helper()
	var last *v1alpha1.RebootPolicy
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = getPolicy(t, dyn, name)
		return cond(last), nil
	})
	if err != nil {
		t.Fatalf("RebootPolicy %s never %s; status %+v", name, what, last.Status)
	}
	return last
}

func condition(rp *v1alpha1.RebootPolicy, typ string) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(rp.Status.Conditions, typ); c != nil && c.ObservedGeneration == rp.Generation {
		return c.Status
	}
	return ""
}

func selector(kv ...string) metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return metav1.LabelSelector{MatchLabels: m}
}

// Two pools roll at once on a real API server: the gpu pool's exclusion is in force, the web pool's
// budget is 2 under a fleet budget of 2. The gpu nodes asked first, yet their closed pool takes no
// budget from the open one: two web nodes go, the third waits for its pool's budget. Then: a third
// policy of the same priority overlaps web (the waiting node is held, both report Overlapping; the
// nodes in their cycle stay pinned to web); relabelling a node in its cycle moves nothing; an edit
// (the exclusion removed) applies without a restart; a spec the parsers refuse holds its nodes and
// says why.
func TestPools(t *testing.T) {
	dyn := needPools(t)
	cleanNodes(t)
	ctx := context.Background()
	now := time.Now().UTC()
	freeze := now.AddDate(0, 0, -1).Format("2006-01-02") + "/" + now.AddDate(0, 0, 1).Format("2006-01-02")
	createPolicy(t, dyn, "gpu", v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", "gpu"), Priority: 10,
		MaxUnavailable: ptr(intstr.FromInt32(1)), Exclusions: []string{freeze}})
	createPolicy(t, dyn, "web", v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", "web"), MaxUnavailable: ptr(intstr.FromInt32(2))})
	for _, n := range []struct{ name, pool string }{{"gpu-0", "gpu"}, {"gpu-1", "gpu"}, {"web-0", "web"}, {"web-1", "web"}, {"web-2", "web"}, {"bad-0", "bad"}} {
		if _, err := testenv.CreateNode(ctx, client, n.name, "boot-a", map[string]string{"pool": n.pool}); err != nil {
			t.Fatal(err)
		}
	}
	// A deleted policy holds its nodes for a second here (30 s by default).
	startOperator(t, opOptions{max: "2", tweak: func(c *operator.Config) { c.Dynamic, c.PolicyDeleteGrace = dyn, time.Second }})
	for _, name := range []string{"gpu-0", "gpu-1"} {
		annotate(t, name, map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	}
	blockedBy(t, "gpu-0", "window")
	blockedBy(t, "gpu-1", "window")
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		annotate(t, name, map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	}
	var admitted, held []string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		admitted, held = nil, nil
		for _, name := range []string{"web-0", "web-1", "web-2"} {
			n := getNode(t, name)
			switch {
			case admittedNow(n):
				admitted = append(admitted, name)
			case strings.HasPrefix(n.Annotations[protocol.BlockedBy], "budget: full (") && strings.Contains(n.Annotations[protocol.BlockedBy], "policy/web"):
				held = append(held, name)
			}
		}
		return len(admitted) == 2 && len(held) == 1, nil
	})
	if err != nil {
		t.Fatalf("web: admitted %v, held by its pool's budget %v; want 2 and 1 (the closed gpu pool must take no budget)", admitted, held)
	}
	for _, name := range admitted {
		if pin := getNode(t, name).Annotations[protocol.AdmittedPolicy]; !strings.HasPrefix(pin, "web/") {
			t.Errorf("%s admitted under %q, want web/<generation>", name, pin)
		}
	}
	web := waitPolicy(t, dyn, "web", "counted its nodes", func(rp *v1alpha1.RebootPolicy) bool {
		return rp.Status.Nodes == 3 && rp.Status.InCycle == 2 && rp.Status.Waiting == 1 && condition(rp, "Accepted") == metav1.ConditionTrue &&
			condition(rp, "Progressing") == metav1.ConditionTrue && rp.Status.Window == "open"
	})
	if web.Status.ObservedGeneration != web.Generation {
		t.Errorf("web observedGeneration %d, generation %d", web.Status.ObservedGeneration, web.Generation)
	}
	waitPolicy(t, dyn, "gpu", "closed", func(rp *v1alpha1.RebootPolicy) bool {
		return rp.Status.Window == "closed" && rp.Status.NextOpen != nil && rp.Status.Waiting == 2
	})

	// Overlap: web2 at web's priority matches the web nodes. The waiting one is held; those in their
	// cycle stay pinned to web.
	waitingWeb := held[0]
	createPolicy(t, dyn, "web2", v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", "web")})
	n := blockedBy(t, waitingWeb, "policy")
	if !strings.Contains(n.Annotations[protocol.BlockedBy], "matches web, web2") {
		t.Errorf("overlap: %q", n.Annotations[protocol.BlockedBy])
	}
	for _, name := range []string{"web", "web2"} {
		waitPolicy(t, dyn, name, "reported the overlap", func(rp *v1alpha1.RebootPolicy) bool { return condition(rp, "Overlapping") == metav1.ConditionTrue })
	}
	waitPolicy(t, dyn, "web", "kept its nodes in their cycle", func(rp *v1alpha1.RebootPolicy) bool { return rp.Status.InCycle == 2 })
	if err := dyn.Resource(v1alpha1.Resource).Delete(ctx, "web2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	blockedBy(t, waitingWeb, "budget")

	// A node in its cycle relabelled into the gpu pool still counts against web (its pin).
	relabel := admitted[0]
	if _, err := client.CoreV1().Nodes().Patch(ctx, relabel, types.MergePatchType, []byte(`{"metadata":{"labels":{"pool":"gpu"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPolicy(t, dyn, "gpu", "counted the relabelled node? no: it is pinned", func(rp *v1alpha1.RebootPolicy) bool { return rp.Status.Nodes == 2 })
	if rp := getPolicy(t, dyn, "web"); rp.Status.InCycle != 2 {
		t.Errorf("web after relabelling %s mid-cycle: in cycle %d, want 2 (pinned)", relabel, rp.Status.InCycle)
	}

	// An edit applies without a restart: the gpu freeze lifted, and the fleet's budget (2, both used by
	// web) is what holds the gpu nodes now.
	patchPolicy(t, dyn, "gpu", map[string]interface{}{"spec": map[string]interface{}{"exclusions": []string{}}})
	blockedBy(t, "gpu-0", "budget")
	waitPolicy(t, dyn, "gpu", "opened", func(rp *v1alpha1.RebootPolicy) bool { return rp.Status.Window == "open" })

	// A spec the schema accepts and the parsers refuse: its node is held, the policy says why.
	createPolicy(t, dyn, "bad", v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", "bad"), Windows: []string{"Moonday 02:00-06:00"}})
	annotate(t, "bad-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	n = blockedBy(t, "bad-0", "policy")
	if !strings.Contains(n.Annotations[protocol.BlockedBy], "invalid: bad: reboot-window") {
		t.Errorf("invalid policy: %q", n.Annotations[protocol.BlockedBy])
	}
	bad := waitPolicy(t, dyn, "bad", "refused", func(rp *v1alpha1.RebootPolicy) bool { return condition(rp, "Accepted") == metav1.ConditionFalse })
	if c := meta.FindStatusCondition(bad.Status.Conditions, "Accepted"); !strings.Contains(c.Message, "reboot-window") || c.Reason != "Invalid" {
		t.Errorf("Accepted: %+v", c)
	}
}

// The schema refuses what it can tell is malformed, before the operator sees it.
func TestPolicySchema(t *testing.T) {
	dyn := needPools(t)
	for _, c := range []struct {
		name string
		spec map[string]interface{}
		want string
	}{
		{"empty-selector", map[string]interface{}{"nodeSelector": map[string]interface{}{}}, "nodeSelector must not be empty"},
		{"zero-budget", map[string]interface{}{"nodeSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"a": "b"}}, "maxUnavailable": 0}, "at least 1"},
		{"bad-percent", map[string]interface{}{"nodeSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"a": "b"}}, "maxUnavailable": "150%"}, "percentage"},
		{"bake-alone", map[string]interface{}{"nodeSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"a": "b"}}, "canary": map[string]interface{}{"bake": "1h"}}, "bake needs nodes"},
		{"reason-alone", map[string]interface{}{"nodeSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"a": "b"}}, "pausedReason": "x"}, "pausedReason needs paused"},
		{"bad-duration", map[string]interface{}{"nodeSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"a": "b"}}, "settle": map[string]interface{}{"time": "ten minutes"}}, "a duration of 0 or more"},
		{"negative-bake", map[string]interface{}{"nodeSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"a": "b"}}, "canary": map[string]interface{}{"nodes": 1, "bake": "-1h"}}, "a positive duration"},
		{"bad-failure-policy", map[string]interface{}{"nodeSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"a": "b"}}, "drain": map[string]interface{}{"failurePolicy": "ignore"}}, "Unsupported value"},
	} {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "RebootPolicy",
			"metadata": map[string]interface{}{"name": c.name}, "spec": c.spec}}
		_, err := dyn.Resource(v1alpha1.Resource).Create(context.Background(), u, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want refused with %q", c.name, err, c.want)
		}
	}
}

// Without the RBAC to read RebootPolicies the operator says so once and runs the flags' policy: the
// node is admitted, the operator does not exit.
func TestPoolsWithoutRBAC(t *testing.T) {
	needPools(t)
	cleanNodes(t)
	ctx := context.Background()
	cfg, err := cp.ClientConfig("no-policies-user")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.CreateNode(ctx, client, "norbac-0", "boot-a", map[string]string{"pool": "gpu"}); err != nil {
		t.Fatal(err)
	}
	startOperator(t, opOptions{tweak: func(c *operator.Config) { c.Dynamic = dynamic.NewForConfigOrDie(cfg) }})
	annotate(t, "norbac-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "norbac-0", 30*time.Second, "admitted under the flags' policy", func(n *corev1.Node) bool {
		return admittedNow(n) && n.Annotations[protocol.AdmittedPolicy] == ""
	})
}

// A pool's own settle and drain, with real agents: the db pool settles 4 s after each node and its
// drain leaves pods labelled app=cache; the flags' policy (no settle, every pod evicted) runs the
// other node beside it. The second db node waits for the first's settle; the cache pod on the first db
// node is never evicted; the other node's pod is.
func TestPoolSettleAndDrain(t *testing.T) {
	dyn := needPools(t)
	cleanNodes(t)
	ctx := context.Background()
	sns := simNodes(t, "psd", 3)
	db0, db1, other := sns[0].Name, sns[1].Name, sns[2].Name
	for _, name := range []string{db0, db1} {
		if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"pool":"db"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createPolicy(t, dyn, "db", v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", "db"), MaxUnavailable: ptr(intstr.FromInt32(1)),
		Settle: &v1alpha1.Settle{Time: &metav1.Duration{Duration: 4 * time.Second}},
		Drain:  &v1alpha1.Drain{PodSelector: ptr("app!=cache")}})
	workloadOn(t, "psd", "cache", db0)
	workloadOn(t, "psd", "web", other)
	cachePod, err := client.CoreV1().Pods("psd").Get(ctx, "cache-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startOperator(t, opOptions{max: "3", tweak: func(c *operator.Config) { c.Dynamic = dyn }})
	waitPolicy(t, dyn, "db", "counted its nodes", func(rp *v1alpha1.RebootPolicy) bool { return rp.Status.Nodes == 2 })
	for _, sn := range sns {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	first, second := firstAndSecond(t, db0, db1)
	h := watchNode(t, second) // every version: the 4 s hold is seen however late the test looks
	waitNode(t, other, 60*time.Second, "the other node finished beside the db pool", finished)
	done := waitNode(t, first, 60*time.Second, "the first db node finished", finished)
	waitNode(t, second, 60*time.Second, "the second db node finished after the settle", finished)
	if h.ever(t, func(n *corev1.Node) bool {
		return n.Annotations[protocol.BlockedBy] == "settling: nodes that finished their cycle hold their slots: --settle-time 4s"
	}) == nil {
		t.Error("the second db node was never held by its pool's settle")
	}
	end, _ := time.Parse(time.RFC3339, done.Annotations[protocol.LastRebootTime])
	if start := h.ever(t, admittedNow); start == nil {
		t.Error("the second db node's admission was not seen")
	} else if at, _ := time.Parse(time.RFC3339, start.Annotations[protocol.CycleStarted]); at.Sub(end) < 3*time.Second {
		t.Errorf("the second db node started %s after the first finished, want >= the 4 s settle (less a second of rounding)", at.Sub(end))
	}
	if first == db0 || second == db0 {
		p, err := client.CoreV1().Pods("psd").Get(ctx, "cache-0", metav1.GetOptions{})
		if err != nil || p.UID != cachePod.UID || p.DeletionTimestamp != nil {
			t.Errorf("the db pool's drain evicted app=cache (its drain.podSelector is app!=cache): %v %+v", err, p)
		}
	}
	if p, err := client.CoreV1().Pods("psd").Get(ctx, "web-0", metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
		t.Errorf("the flags' drain left web-0 on %s", other)
	}
}

// A pool's own gates, on a real API server: the db pool's health check (a ConfigMap's CEL) holds only
// the db pool's nodes, and its blocking pod selector holds the db node a backup runs on; the flags'
// node beside them goes. Each hold names the policy, and lifts when the object or the pod changes.
func TestPoolBlockers(t *testing.T) {
	dyn := needPools(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns = "pool-gates"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	gate := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "db-gate", Namespace: ns}, Data: map[string]string{"healthy": "no"}}
	_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, gate.Name, metav1.DeleteOptions{})
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, gate, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []struct{ name, pool string }{{"pg-db-0", "db"}, {"pg-web-0", "web"}} {
		if _, err := testenv.CreateNode(ctx, client, n.name, "boot-a", map[string]string{"pool": n.pool}); err != nil {
			t.Fatal(err)
		}
	}
	createPolicy(t, dyn, "db", v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", "db"),
		HealthChecks:         []string{"configmaps/db-gate@" + ns + ": object.data.healthy == 'yes'"},
		BlockingPodSelectors: []string{"app=backup"}})
	workloadOn(t, ns, "backup", "pg-db-0")
	startOperator(t, opOptions{max: "2", tweak: func(c *operator.Config) { c.Dynamic = dyn }})
	for _, name := range []string{"pg-db-0", "pg-web-0"} {
		annotate(t, name, map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	}
	waitNode(t, "pg-web-0", 30*time.Second, "the flags' node admitted beside the held pool", admittedNow)
	n := blockedBy(t, "pg-db-0", "health")
	if !strings.HasPrefix(n.Annotations[protocol.BlockedBy], "health: policy db: ") {
		t.Errorf("the db pool's health check: %q", n.Annotations[protocol.BlockedBy])
	}
	if _, err := client.CoreV1().ConfigMaps(ns).Patch(ctx, gate.Name, types.MergePatchType, []byte(`{"data":{"healthy":"yes"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	n = blockedBy(t, "pg-db-0", "pods-on-node")
	if !strings.Contains(n.Annotations[protocol.BlockedBy], "policy db: ") || !strings.Contains(n.Annotations[protocol.BlockedBy], "backup") {
		t.Errorf("the db pool's blocking pod selector: %q", n.Annotations[protocol.BlockedBy])
	}
	if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}, metav1.ListOptions{LabelSelector: "app=backup"}); err != nil {
		t.Fatal(err)
	}
	waitNode(t, "pg-db-0", 30*time.Second, "admitted once its pool's gates hold", admittedNow)
}

// missingResource is a dynamic client whose RebootPolicy resource the API server does not serve: what
// a cluster without the CRD answers (404).
type missingResource struct{ dynamic.Interface }

func (m missingResource) Resource(r schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	if r == v1alpha1.Resource {
		r.Resource = "nosuchrebootpolicies"
	}
	return m.Interface.Resource(r)
}

// Without the CRD (the API server answers 404) the operator runs the flags' policy and does not exit;
// the status view lists no policies.
func TestPoolsWithoutCRD(t *testing.T) {
	dyn := needPools(t)
	cleanNodes(t)
	ctx := context.Background()
	if _, err := testenv.CreateNode(ctx, client, "nocrd-0", "boot-a", map[string]string{"pool": "gpu"}); err != nil {
		t.Fatal(err)
	}
	// A policy exists, but this operator cannot see the resource: it must not matter.
	createPolicy(t, dyn, "gpu", v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", "gpu"), Paused: true})
	startOperator(t, opOptions{tweak: func(c *operator.Config) { c.Dynamic = missingResource{dyn} }})
	annotate(t, "nocrd-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	waitNode(t, "nocrd-0", 30*time.Second, "admitted under the flags' policy", func(n *corev1.Node) bool {
		return admittedNow(n) && n.Annotations[protocol.AdmittedPolicy] == ""
	})
}

// A deleted RebootPolicy holds its waiting nodes for the grace period (a policy deleted and created
// again never opens them to another policy), then they go to the flags' policy; created again within
// the grace, it takes them back at once. The first operator's grace is an hour, so no test is too slow
// to recreate the policy within it; the second's is 3 s, and a watch records every version of the node,
// so the hold is seen however short it was and however late the test looks.
func TestDeletedPolicyHoldsItsNodes(t *testing.T) {
	dyn := needPools(t)
	cleanNodes(t)
	ctx := context.Background()
	now := time.Now().UTC()
	freeze := now.AddDate(0, 0, -1).Format("2006-01-02") + "/" + now.AddDate(0, 0, 1).Format("2006-01-02")
	spec := v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", "gpu"), Exclusions: []string{freeze}}
	createPolicy(t, dyn, "gpu", spec)
	if _, err := testenv.CreateNode(ctx, client, "del-0", "boot-a", map[string]string{"pool": "gpu"}); err != nil {
		t.Fatal(err)
	}
	stop := startOperator(t, opOptions{tweak: func(c *operator.Config) { c.Dynamic, c.PolicyDeleteGrace = dyn, time.Hour }})
	annotate(t, "del-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	blockedBy(t, "del-0", "window")
	del := func() {
		if err := dyn.Resource(v1alpha1.Resource).Delete(ctx, "gpu", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Replaced: deleted and created again within the grace.
	del()
	n := blockedBy(t, "del-0", "policy")
	if !strings.Contains(n.Annotations[protocol.BlockedBy], "invalid: gpu: deleted") {
		t.Errorf("deleted: %q", n.Annotations[protocol.BlockedBy])
	}
	createPolicy(t, dyn, "gpu", spec)
	blockedBy(t, "del-0", "window")
	stop()

	// Deleted for good: held for the grace, then the flags' policy admits it.
	startOperator(t, opOptions{tweak: func(c *operator.Config) { c.Dynamic, c.PolicyDeleteGrace = dyn, 3*time.Second }})
	settled(t, "del-0") // the new leader has looked: still held by the window
	if n := getNode(t, "del-0"); !strings.HasPrefix(n.Annotations[protocol.BlockedBy], "window: ") {
		t.Fatalf("under the second operator: %q", n.Annotations[protocol.BlockedBy])
	}
	h := watchNode(t, "del-0")
	held := time.Now()
	del()
	n = waitNode(t, "del-0", 30*time.Second, "admitted under the flags' policy after the grace", admittedNow)
	if d := time.Since(held); d < 2*time.Second || n.Annotations[protocol.AdmittedPolicy] != "" {
		t.Errorf("admitted %s after the deletion under %q; want the 3 s grace, then the flags'", d, n.Annotations[protocol.AdmittedPolicy])
	}
	if h.ever(t, func(n *corev1.Node) bool { return strings.HasPrefix(n.Annotations[protocol.BlockedBy], "policy: ") }) == nil {
		t.Error("never held by the deleted policy before the flags' policy admitted it")
	}
}

// A pool's own steering, with real agents: the gpu pool's waiting node carries the pool's taint, its
// node in its cycle the load-balancer exclusion and the pool's pre-reboot label, removed when the cycle
// ends; the flags' node (no steering) waits untainted and finishes unlabelled.
func TestPoolSteering(t *testing.T) {
	dyn := needPools(t)
	cleanNodes(t)
	ctx := context.Background()
	sns := simNodes(t, "pst", 3)
	g0, g1, other := sns[0].Name, sns[1].Name, sns[2].Name
	for _, name := range []string{g0, g1} {
		if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"pool":"gpu"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createPolicy(t, dyn, "gpu", v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", "gpu"),
		Steering: &v1alpha1.Steering{PreferNoScheduleTaint: ptr("example.com/gpu-waiting"), ExcludeFromLoadBalancers: ptr(true),
			PreLabels: []string{"example.com/draining=true"}, PostLabels: []string{"example.com/draining-"}}})
	startOperator(t, opOptions{max: "1", tweak: func(c *operator.Config) { c.Dynamic = dyn }})
	waitPolicy(t, dyn, "gpu", "counted its nodes", func(rp *v1alpha1.RebootPolicy) bool { return rp.Status.Nodes == 2 })
	if err := sns[0].SendNeedReboot(); err != nil {
		t.Fatal(err)
	}
	waitNode(t, g0, 30*time.Second, "in its cycle with the pool's steering", func(n *corev1.Node) bool {
		return admittedNow(n) && n.Labels["example.com/draining"] == "true" && n.Labels[protocol.ExcludeFromLBs] == protocol.True
	})
	for _, sn := range sns[1:] {
		if err := sn.SendNeedReboot(); err != nil {
			t.Fatal(err)
		}
	}
	tainted := func(n *corev1.Node) bool {
		for _, tn := range n.Spec.Taints {
			if tn.Key == "example.com/gpu-waiting" && tn.Effect == corev1.TaintEffectPreferNoSchedule {
				return true
			}
		}
		return false
	}
	waitNode(t, g1, 30*time.Second, "waiting with the pool's taint", func(n *corev1.Node) bool { return n.Annotations[protocol.BlockedBy] != "" && tainted(n) })
	if n := waitNode(t, other, 30*time.Second, "the flags' node waiting", func(n *corev1.Node) bool { return n.Annotations[protocol.BlockedBy] != "" || admittedNow(n) }); tainted(n) {
		t.Errorf("the flags' node (no steering) carries the gpu pool's taint: %v", n.Spec.Taints)
	}
	for _, name := range []string{g0, g1, other} {
		n := waitNode(t, name, 90*time.Second, "finished", finished)
		if _, ok := n.Labels["example.com/draining"]; ok || n.Labels[protocol.ExcludeFromLBs] != "" || tainted(n) {
			t.Errorf("%s after its cycle: labels %v taints %v", name, n.Labels, n.Spec.Taints)
		}
	}
}

// RebootPolicies past the maximum are refused, the newest ones: Accepted=False with reason TooMany,
// their nodes held (blocked-by policy); the older ones run on.
func TestTooManyPolicies(t *testing.T) {
	dyn := needPools(t)
	cleanNodes(t)
	ctx := context.Background()
	for _, name := range []string{"many-a", "many-c"} {
		if _, err := testenv.CreateNode(ctx, client, name, "boot-"+name, map[string]string{"pool": name}); err != nil {
			t.Fatal(err)
		}
	}
	startOperator(t, opOptions{max: "3", tweak: func(c *operator.Config) { c.Dynamic, c.MaxPolicies = dyn, 2 }})
	for _, name := range []string{"many-a", "many-b", "many-c"} {
		createPolicy(t, dyn, name, v1alpha1.RebootPolicySpec{NodeSelector: selector("pool", name)})
		time.Sleep(1100 * time.Millisecond) // creation timestamps are to the second: the order is by age
	}
	c := waitPolicy(t, dyn, "many-c", "refused as one too many", func(rp *v1alpha1.RebootPolicy) bool { return condition(rp, "Accepted") == metav1.ConditionFalse })
	if got := meta.FindStatusCondition(c.Status.Conditions, "Accepted"); got.Reason != "TooMany" || !strings.Contains(got.Message, "more than 2 RebootPolicies") {
		t.Errorf("many-c's Accepted: %+v", got)
	}
	waitPolicy(t, dyn, "many-a", "accepted", func(rp *v1alpha1.RebootPolicy) bool { return condition(rp, "Accepted") == metav1.ConditionTrue })
	annotate(t, "many-c", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	annotate(t, "many-a", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	blockedBy(t, "many-c", "policy")
	waitNode(t, "many-a", 30*time.Second, "admitted under the accepted policy", func(n *corev1.Node) bool { return n.Annotations[protocol.CycleStarted] != "" })
}
