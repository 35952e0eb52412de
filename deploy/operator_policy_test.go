package deploy

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

const operatorPolicy = "slipway-update-operator"

// operatorPolicyDoc reads base/operator-policy.yaml's ValidatingAdmissionPolicy.
func operatorPolicyDoc(t *testing.T) admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	b, err := os.ReadFile("base/operator-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := yaml.Unmarshal([]byte(strings.Split(string(b), "\n---\n")[0]), &vap); err != nil {
		t.Fatal(err)
	}
	return vap
}

func quotedIn(expr string) []string {
	var keys []string
	for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(expr, -1) {
		keys = append(keys, m[1])
	}
	sort.Strings(keys)
	return keys
}

// The keys the operator's policy lets it change are exactly what it writes: its own keys in
// protocol.Owners (before-reboot and after-reboot as labels) and FLUO's agent-made-unschedulable.
// Not what a node asks with (reboot-needed, reboot-in-progress, the FleetLock keys): the FleetLock
// server runs as update-agent under its own ServiceAccount, not in the operator. The spec rule names
// every NodeSpec field but unschedulable, so a field added to Kubernetes is noticed here rather than
// left writable.
func TestOperatorPolicyKeys(t *testing.T) {
	vap := operatorPolicyDoc(t)
	vars := map[string]string{}
	for _, v := range vap.Spec.Variables {
		vars[v.Name] = v.Expression
	}
	operatorLabels := []string{protocol.BeforeReboot, protocol.AfterReboot}
	var wantAnn, wantLabels []string
	for k, w := range protocol.Owners {
		if w == protocol.WriterOperator && !slices.Contains(operatorLabels, k) {
			wantAnn = append(wantAnn, k)
		}
	}
	wantAnn = append(wantAnn, protocol.AgentMadeUnschedulable)
	wantLabels = append(wantLabels, operatorLabels...)
	sort.Strings(wantAnn)
	sort.Strings(wantLabels)
	if got := quotedIn(vars["operatorAnnotations"]); !slices.Equal(got, wantAnn) {
		t.Errorf("operator-policy.yaml operatorAnnotations = %q,\nwant %q", got, wantAnn)
	}
	if got := quotedIn(vars["operatorLabels"]); !slices.Equal(got, wantLabels) {
		t.Errorf("operator-policy.yaml operatorLabels = %q, want %q", got, wantLabels)
	}
	for _, v := range settingVars {
		want := "''"
		if v == "excludeFromLoadBalancers" {
			want = "'false'"
		}
		if vars[v] != want {
			t.Errorf("the base's %s is %s; it ships with %s (no hooks, no steering)", v, vars[v], want)
		}
	}
	var specRule string
	for _, v := range vap.Spec.Validations {
		if strings.Contains(v.Expression, "object.spec") {
			specRule = v.Expression
		}
	}
	typ := reflect.TypeOf(corev1.NodeSpec{})
	for i := 0; i < typ.NumField(); i++ {
		name := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]
		if name == "unschedulable" {
			if strings.Contains(specRule, "spec."+name) || strings.Contains(specRule, "spec.?"+name) {
				t.Error("the spec rule constrains unschedulable, which the operator must change")
			}
			continue
		}
		if !strings.Contains(specRule, "spec.?"+name) && !strings.Contains(specRule, "spec."+name) {
			t.Errorf("NodeSpec field %s is not held by the operator policy's spec rule", name)
		}
	}
}

// TestOperatorPolicy proves base/operator-policy.yaml on a real API server with the operator's real
// credential: a TokenRequest token bound to an operator Pod, used alone. Everything a cycle writes is
// allowed; taints, foreign labels and annotations, other spec fields and status are refused and change
// nothing.
func TestOperatorPolicy(t *testing.T) {
	ctx := context.Background()
	cp := controlPlane(t)
	admin := cp.Client()
	if _, err := testenv.CreateNode(ctx, admin, "op-a", "boot-op-a", nil); err != nil {
		t.Fatal(err)
	}
	pod := podOf(ctx, t, admin, "slipway-update-operator", "update-operator-a", "op-a")
	op := tokenClient(cp, saToken(ctx, t, admin, "slipway-update-operator", pod))
	if u := whoAmI(ctx, t, op); u.Username != "system:serviceaccount:"+ns+":slipway-update-operator" {
		t.Fatalf("the token authenticates as %s", u.Username)
	}
	waitEnforced(ctx, t, op, operatorPolicy, "op-a", `{"spec":{"taints":[{"key":"example.com/probe","effect":"NoSchedule"}]}}`)
	// The admission below writes admitted-by op/1: the fence (fence-policy.yaml) lets it land in that
	// leadership term only.
	if err := testenv.HoldLease(ctx, admin, ns, "slipway-update-operator", "op", 1); err != nil {
		t.Fatal(err)
	}
	defer admin.CoordinationV1().Leases(ns).Delete(ctx, "slipway-update-operator", metav1.DeleteOptions{})

	seed := `{"metadata":{"labels":{"node-role.kubernetes.io/worker":""},"annotations":{"` + protocol.RebootPaused + `":"true","example.com/hook":"true","example.com/other":"x"}}}`
	if _, err := admin.CoreV1().Nodes().Patch(ctx, "op-a", types.MergePatchType, []byte(seed), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("a whole cycle's writes", func(t *testing.T) {
		steps := []func(n *corev1.Node, p *nodes.Patch){
			func(n *corev1.Node, p *nodes.Patch) { // admission, cordon, drain
				p.SetLabel(n, protocol.BeforeReboot, protocol.True)
				p.SetAnnotation(n, protocol.CycleStarted, "2026-11-24T00:00:00Z")
				p.SetAnnotation(n, protocol.AdmittedGroup, "a")
				p.SetAnnotation(n, protocol.AdmittedBy, "op/1")
				p.SetUnschedulable(n, true)
				p.SetAnnotation(n, protocol.Cordoned, protocol.True)
				p.SetAnnotation(n, protocol.DrainStarted, "2026-11-24T00:00:00Z")
			},
			func(n *corev1.Node, p *nodes.Patch) { // grant
				p.DeleteLabel(n, protocol.BeforeReboot)
				p.SetAnnotation(n, protocol.RebootOK, protocol.True)
				p.SetAnnotation(n, protocol.RebootBootID, "boot-op-a")
				p.DeleteAnnotation(n, protocol.DrainStarted)
			},
			func(n *corev1.Node, p *nodes.Patch) { // the end: uncordon, FLUO's leftover, bookkeeping
				p.SetAnnotation(n, protocol.RebootOK, protocol.False)
				p.SetUnschedulable(n, false)
				p.SetAnnotation(n, protocol.AgentMadeUnschedulable, protocol.False)
				for _, k := range []string{protocol.Cordoned, protocol.RebootBootID, protocol.CycleStarted, protocol.AdmittedGroup, protocol.AdmittedBy} {
					p.DeleteAnnotation(n, k)
				}
				p.SetAnnotation(n, protocol.LastRebootTime, "2026-11-24T00:10:00Z")
			},
		}
		for i, step := range steps {
			n, err := admin.CoreV1().Nodes().Get(ctx, "op-a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p := nodes.Patch{ResourceVersion: n.ResourceVersion}
			step(n, &p)
			if _, err := p.Apply(ctx, op, n); err != nil {
				t.Fatalf("step %d refused: %v", i, err)
			}
		}
		n, _ := admin.CoreV1().Nodes().Get(ctx, "op-a", metav1.GetOptions{})
		if n.Spec.Unschedulable || n.Annotations[protocol.RebootOK] != protocol.False || n.Annotations[protocol.LastRebootTime] == "" {
			t.Errorf("the cycle's writes did not land: unschedulable=%v %v", n.Spec.Unschedulable, n.Annotations)
		}
	})

	ann := func(k string, v *string) string {
		val := "null"
		if v != nil {
			val = `"` + *v + `"`
		}
		return `{"metadata":{"annotations":{"` + k + `":` + val + `}}}`
	}
	x := "changed"
	for _, c := range []struct {
		name, body, sub, why string
	}{
		{"NoExecute taint", `{"spec":{"taints":[{"key":"example.com/evict","effect":"NoExecute"}]}}`, "", "only spec.unschedulable"},
		{"a PreferNoSchedule taint not configured", `{"spec":{"taints":[{"key":"example.com/reboot-pending","effect":"PreferNoSchedule"}]}}`, "", "only spec.unschedulable"},
		{"the load-balancer exclusion not configured", `{"metadata":{"labels":{"` + protocol.ExcludeFromLBs + `":"true"}}}`, "", "does not own: " + protocol.ExcludeFromLBs + " (a steering label must be in the operator's steering settings"},
		{"podCIDR", `{"spec":{"podCIDR":"10.9.0.0/24","podCIDRs":["10.9.0.0/24"]}}`, "", "only spec.unschedulable"},
		{"providerID", `{"spec":{"providerID":"aws:///x/i-1"}}`, "", "only spec.unschedulable"},
		{"relabel into another zone", `{"metadata":{"labels":{"topology.kubernetes.io/zone":"b"}}}`, "", "labels the update-operator does not own: topology.kubernetes.io/zone"},
		{"remove a foreign label", `{"metadata":{"labels":{"node-role.kubernetes.io/worker":null}}}`, "", "labels the update-operator does not own: node-role.kubernetes.io/worker"},
		{"FleetLock enrolment label", `{"metadata":{"labels":{"` + protocol.FleetLockEnrolled + `":"true"}}}`, "", "does not own: " + protocol.FleetLockEnrolled},
		{"remove the admin's reboot-paused", ann(protocol.RebootPaused, nil), "", "does not own: " + protocol.RebootPaused},
		{"an unlisted hook annotation", ann("example.com/hook", nil), "", "does not own: example.com/hook (a hook annotation must be in the operator's --before/--after-reboot-annotations"},
		{"someone else's annotation", ann("example.com/other", &x), "", "does not own: example.com/other"},
		{"the agent's status", ann(protocol.Status, &x), "", "does not own: " + protocol.Status},
		{"a node's ask (reboot-needed)", ann(protocol.RebootNeeded, &x), "", "does not own: " + protocol.RebootNeeded},
		{"a FleetLock group", ann(protocol.FleetLockGroup, &x), "", "does not own: " + protocol.FleetLockGroup},
		{"a finalizer", `{"metadata":{"finalizers":["example.com/x"]}}`, "", "only labels and annotations"},
		{"node status", `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"x","message":"x"}]}}`, "status", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, err := admin.CoreV1().Nodes().Get(ctx, "op-a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var subs []string
			if c.sub != "" {
				subs = []string{c.sub}
			}
			_, err = op.CoreV1().Nodes().Patch(ctx, "op-a", types.MergePatchType, []byte(c.body), metav1.PatchOptions{}, subs...)
			switch {
			case err == nil:
				t.Errorf("patch %s was allowed", c.body)
			case !apierrors.IsForbidden(err):
				t.Errorf("not refused as Forbidden: %v", err)
			case c.why != "" && !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+operatorPolicy+"'"):
				t.Errorf("refused, but not by the policy: %v", err)
			case !strings.Contains(err.Error(), c.why):
				t.Errorf("refusal does not say %q: %v", c.why, err)
			}
			after, err := admin.CoreV1().Nodes().Get(ctx, "op-a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if after.ResourceVersion != before.ResourceVersion {
				t.Errorf("op-a changed: labels %v, annotations %v, spec %+v", after.Labels, after.Annotations, after.Spec)
			}
		})
	}

	// A hook named in deploy/operator-settings' ConfigMap (as --before-reboot-annotations, spaces
	// around the comma too) may be removed: the component's policy on the real API server.
	t.Run("a listed hook annotation", func(t *testing.T) {
		setPolicyVars(ctx, t, admin, componentVars(t, map[string]string{"before-reboot-annotations": "example.com/other-hook , example.com/hook"}))
		body := []byte(ann("example.com/hook", nil))
		var last error
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, last = op.CoreV1().Nodes().Patch(ctx, "op-a", types.MergePatchType, body, metav1.PatchOptions{})
			return last == nil, nil
		}); err != nil {
			t.Fatalf("removing a listed hook annotation is still refused after 1m: %v", last)
		}
		n, _ := admin.CoreV1().Nodes().Get(ctx, "op-a", metav1.GetOptions{})
		if _, ok := n.Annotations["example.com/hook"]; ok {
			t.Error("the hook annotation is still there")
		}
	})

	// Steering configured in deploy/operator-settings' ConfigMap (the same policy Helm renders from
	// its values): exactly that PreferNoSchedule taint and those labels (KEY=VALUE and KEY- forms) may
	// change; another effect or key, another label, or someone else's taint is still refused. Then,
	// with steering turned off again, what the operator marked as its own (lb-excluded,
	// prefer-no-schedule-taint) it may still remove, and nothing more.
	t.Run("steering", func(t *testing.T) {
		if _, err := admin.CoreV1().Nodes().Patch(ctx, "op-a", types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/gone":"x"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		setPolicyVars(ctx, t, admin, componentVars(t, map[string]string{
			"pre-reboot-node-labels":      "example.com/reboot=rebooting",
			"post-reboot-node-labels":     "example.com/reboot=done,example.com/gone-",
			"exclude-from-load-balancers": "true",
			"prefer-no-schedule-taint":    "example.com/reboot-pending",
			"reboot-policy-labels":        "pool.example.com/draining=true",
			"reboot-policy-taints":        "pool.example.com/pending",
		}))
		gpu := `{"key":"example.com/gpu","effect":"NoSchedule"}`
		pending := `{"key":"example.com/reboot-pending","effect":"PreferNoSchedule"}`
		if _, err := admin.CoreV1().Nodes().Patch(ctx, "op-a", types.MergePatchType, []byte(`{"spec":{"taints":[`+gpu+`]}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		allowed := `{"metadata":{"labels":{"` + protocol.ExcludeFromLBs + `":"true","example.com/reboot":"rebooting","example.com/gone":null},"annotations":{"` +
			protocol.LBExcluded + `":"true","` + protocol.PreferNoScheduleTaint + `":"example.com/reboot-pending"}},"spec":{"taints":[` + gpu + `,` + pending + `]}}`
		var last error
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := op.CoreV1().Nodes().Patch(ctx, "op-a", types.MergePatchType, []byte(allowed), metav1.PatchOptions{})
			if err != nil && ctx.Err() == nil {
				last = err
			}
			return err == nil, nil
		}); err != nil {
			t.Fatalf("the configured steering writes are still refused after 1m: %v", last)
		}
		// A RebootPolicy's steering, listed in the settings: its label and PreferNoSchedule taint
		// on, then off again.
		withPool := `{"metadata":{"labels":{"pool.example.com/draining":"true"}},"spec":{"taints":[` + gpu + `,` + pending + `,{"key":"pool.example.com/pending","effect":"PreferNoSchedule"}]}}`
		withoutPool := `{"metadata":{"labels":{"pool.example.com/draining":null}},"spec":{"taints":[` + gpu + `,` + pending + `]}}`
		for _, body := range []string{withPool, withoutPool} {
			if _, err := op.CoreV1().Nodes().Patch(ctx, "op-a", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
				t.Errorf("a RebootPolicy's steering, listed in the settings: patch %s: %v", body, err)
			}
		}
		for _, body := range []string{
			`{"spec":{"taints":[` + gpu + `,{"key":"example.com/reboot-pending","effect":"NoSchedule"}]}}`,
			`{"spec":{"taints":[` + gpu + `,` + pending + `,{"key":"example.com/other","effect":"PreferNoSchedule"}]}}`,
			`{"spec":{"taints":[` + pending + `]}}`, // the admin's taint dropped
			`{"metadata":{"labels":{"example.com/unlisted":"x"}}}`,
		} {
			if _, err := op.CoreV1().Nodes().Patch(ctx, "op-a", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err == nil || !apierrors.IsForbidden(err) {
				t.Errorf("patch %s: %v, want refused", body, err)
			}
		}
		setPolicyVars(ctx, t, admin, componentVars(t, nil))
		waitEnforced(ctx, t, op, operatorPolicy, "op-a", `{"metadata":{"labels":{"example.com/reboot":"done"}}}`)
		cleanup := `{"metadata":{"labels":{"` + protocol.ExcludeFromLBs + `":null},"annotations":{"` + protocol.LBExcluded + `":null,"` +
			protocol.PreferNoScheduleTaint + `":null}},"spec":{"taints":[` + gpu + `]}}`
		if _, err := op.CoreV1().Nodes().Patch(ctx, "op-a", types.MergePatchType, []byte(cleanup), metav1.PatchOptions{}); err != nil {
			t.Errorf("removing what the operator marked as its own, steering off: %v", err)
		}
		n, _ := admin.CoreV1().Nodes().Get(ctx, "op-a", metav1.GetOptions{})
		if _, ok := n.Labels[protocol.ExcludeFromLBs]; ok || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "example.com/gpu" {
			t.Errorf("after the cleanup: labels %v, taints %v", n.Labels, n.Spec.Taints)
		}
		// Unmarked now: the same removal of a label someone else set is refused.
		if _, err := admin.CoreV1().Nodes().Patch(ctx, "op-a", types.MergePatchType, []byte(`{"metadata":{"labels":{"`+protocol.ExcludeFromLBs+`":""}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := op.CoreV1().Nodes().Patch(ctx, "op-a", types.MergePatchType, []byte(`{"metadata":{"labels":{"`+protocol.ExcludeFromLBs+`":null}}}`), metav1.PatchOptions{}); err == nil {
			t.Error("the operator removed a load-balancer exclusion it did not mark")
		}
	})
}

// settingVars are the operator policy's variables deploy/operator-settings fills: one per flag, and
// what RebootPolicies steer with.
var settingVars = []string{"beforeRebootAnnotations", "afterRebootAnnotations", "preRebootNodeLabels",
	"postRebootNodeLabels", "excludeFromLoadBalancers", "preferNoScheduleTaint", "rebootPolicyLabels", "rebootPolicyTaints"}

// componentVars renders deploy/ with deploy/operator-settings and a settings ConfigMap holding
// settings (flag name -> value; the rest off) as a user's overlay does, and returns the six variables
// of the operator policy it renders.
func componentVars(t *testing.T, settings map[string]string) map[string]string {
	t.Helper()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: slipway-operator-settings\n  annotations: {config.kubernetes.io/local-config: \"true\"}\ndata:\n"
	for _, f := range []string{"before-reboot-annotations", "after-reboot-annotations", "pre-reboot-node-labels", "post-reboot-node-labels",
		"exclude-from-load-balancers", "prefer-no-schedule-taint", "reboot-policy-labels", "reboot-policy-taints"} {
		v, ok := settings[f]
		if !ok && f == "exclude-from-load-balancers" {
			v = "false"
		}
		cm += fmt.Sprintf("  %s: %q\n", f, v)
	}
	vars := map[string]string{}
	for _, doc := range strings.Split(kustomize(t, overlay(t, "operator-settings", cm)), "\n---\n") {
		var vap admissionregistrationv1.ValidatingAdmissionPolicy
		if err := yaml.Unmarshal([]byte(doc), &vap); err != nil || vap.Kind != "ValidatingAdmissionPolicy" || vap.Name != operatorPolicy {
			continue
		}
		for _, v := range vap.Spec.Variables {
			if slices.Contains(settingVars, v.Name) {
				vars[v.Name] = v.Expression
			}
		}
	}
	if len(vars) != len(settingVars) {
		t.Fatalf("the component's policy has %d of the %d setting variables: %v", len(vars), len(settingVars), vars)
	}
	return vars
}

// setPolicyVars sets variables of the operator's policy until the test ends.
func setPolicyVars(ctx context.Context, t *testing.T, admin kubernetes.Interface, vars map[string]string) {
	t.Helper()
	vap, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, operatorPolicy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orig := vap.DeepCopy()
	for i, v := range vap.Spec.Variables {
		if e, ok := vars[v.Name]; ok {
			vap.Spec.Variables[i].Expression = e
		}
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(ctx, vap, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cur, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, operatorPolicy, metav1.GetOptions{})
		if err == nil {
			cur.Spec = orig.Spec
			_, err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("restoring the policy: %v", err)
		}
	})
}

// waitEnforced waits until the API server refuses c's dry-run patch body of node by the admission
// policy named policy: a new policy is enforced once compiled, and nothing is written while it is not.
func waitEnforced(ctx context.Context, t *testing.T, c kubernetes.Interface, policy, node, body string) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(body), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), "ValidatingAdmissionPolicy '"+policy+"'"), nil
	}); err != nil {
		t.Fatalf("the policy does not refuse %s after 1m (last answer: %v)", body, last)
	}
}
