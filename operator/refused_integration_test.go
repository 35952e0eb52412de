package operator_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator"
)

type countPatches struct {
	rt   http.RoundTripper
	path string
	n    *atomic.Int64
}

func (c countPatches) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, c.path) {
		c.n.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// An admission the API server keeps refusing (a webhook, an admission policy) is retried with
// backoff: each refusal frees the slot the admission had reserved, which starts a pass over the
// waiting nodes, and that pass must not put the refused node back at once (it used to: ~130 PATCHes
// a second against the API server, found by the VM suite when a policy refused the operator).
func TestRefusedAdmissionBacksOff(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	// Refuse the cordon mark on hot-0, as a policy the operator cannot satisfy would.
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "refuse-hot-0"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}}}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "object.metadata.name != 'hot-0' || object.metadata.?annotations[?'" + protocol.Cordoned + "'].orValue('') != 'true'",
				Message:    "refused by the test"}}}}
	if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, vap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, "refuse-hot-0", metav1.DeleteOptions{})
		_ = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, "refuse-hot-0", metav1.DeleteOptions{})
	})
	if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-hot-0"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "refuse-hot-0",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyNode(t, "hot-0", nil, nil)
	cordon := []byte(`{"metadata":{"annotations":{"` + protocol.Cordoned + `":"true"}}}`)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Nodes().Patch(ctx, "hot-0", types.MergePatchType, cordon, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "refused by the test"), nil
	}); err != nil {
		t.Fatal("the test's policy never took effect")
	}

	var patches atomic.Int64
	cfg := cp.RestConfig()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return countPatches{rt: rt, path: "/nodes/hot-0", n: &patches}
	}
	counted := kubernetes.NewForConfigOrDie(cfg)
	startOperator(t, opOptions{max: "1", tweak: func(c *operator.Config) { c.Client = counted }})
	annotate(t, "hot-0", map[string]*string{protocol.RebootNeeded: strPtr(protocol.True)})

	// The operator is trying: its admission has been refused a few times.
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return patches.Load() >= 3, nil
	}); err != nil {
		t.Fatalf("the operator never tried to admit hot-0 (%d PATCHes)", patches.Load())
	}
	// From then on, 3 s: with backoff (5 ms doubling) about 10 more tries at most; without, hundreds.
	from := patches.Load()
	time.Sleep(3 * time.Second)
	if n := patches.Load() - from; n > 30 {
		t.Errorf("%d PATCHes of the refused node in 3 s: the refused admission is retried without backoff", n)
	}
	if n := getNode(t, "hot-0"); n.Spec.Unschedulable || n.Annotations[protocol.Cordoned] == protocol.True {
		t.Errorf("hot-0 was admitted through the policy: %v", n.Annotations)
	}
}
