package deploy

import (
	"context"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// agentLabelKeys are the agent's keys that are labels; every other agent key is an annotation
// (reboot-needed is both). protocol.Owners says who writes a key, not whether it is a label.
var agentLabelKeys = []string{protocol.RebootNeeded, protocol.ID, protocol.Version, protocol.Group}

// policyKeys reads the agentAnnotations and agentLabels lists out of base/agent-policy.yaml.
func policyKeys(t *testing.T) (annotations, labels []string) {
	t.Helper()
	b, err := os.ReadFile("base/agent-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := yaml.Unmarshal([]byte(strings.Split(string(b), "\n---\n")[0]), &vap); err != nil {
		t.Fatal(err)
	}
	quoted := regexp.MustCompile(`'([^']*)'`)
	list := func(name string) []string {
		for _, v := range vap.Spec.Variables {
			if v.Name == name {
				var keys []string
				for _, m := range quoted.FindAllStringSubmatch(v.Expression, -1) {
					keys = append(keys, m[1])
				}
				sort.Strings(keys)
				return keys
			}
		}
		t.Fatalf("base/agent-policy.yaml has no variable %s", name)
		return nil
	}
	return list("agentAnnotations"), list("agentLabels")
}

// The keys the policy lets the agent change are exactly the agent's keys in protocol.Owners: a key
// given to the agent there and forgotten here would be refused on every Node; one listed here that the
// agent does not own would let any agent pod write it.
func TestAgentPolicyKeys(t *testing.T) {
	annotations, labels := policyKeys(t)
	var wantAnnotations []string
	for k, w := range protocol.Owners {
		if w == protocol.WriterAgent && (k == protocol.RebootNeeded || !slices.Contains(agentLabelKeys, k)) {
			wantAnnotations = append(wantAnnotations, k)
		}
	}
	sort.Strings(wantAnnotations)
	wantLabels := slices.Clone(agentLabelKeys)
	sort.Strings(wantLabels)
	if !slices.Equal(annotations, wantAnnotations) {
		t.Errorf("agent-policy.yaml agentAnnotations = %q,\nprotocol.Owners gives the agent the annotations %q\n(a new agent label goes into agentLabelKeys here and agentLabels there)", annotations, wantAnnotations)
	}
	if !slices.Equal(labels, wantLabels) {
		t.Errorf("agent-policy.yaml agentLabels = %q, want %q", labels, wantLabels)
	}
	for _, k := range wantLabels {
		if protocol.Owners[k] != protocol.WriterAgent {
			t.Errorf("label %s is in agentLabelKeys, but protocol.Owners gives it to %q", k, protocol.Owners[k])
		}
	}
}

// tokenClient is a client that authenticates with nothing but token: no client certificate, no
// impersonation.
func tokenClient(cp *testenv.ControlPlane, token string) kubernetes.Interface {
	admin := cp.RestConfig()
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: admin.Host, BearerToken: token, TLSClientConfig: admin.TLSClientConfig})
}

// agentToken mints a token for the agent ServiceAccount with the TokenRequest API, bound to pod when
// it is not nil (as the kubelet's projected token is), unbound otherwise.
func agentToken(ctx context.Context, t *testing.T, admin kubernetes.Interface, pod *corev1.Pod) string {
	t.Helper()
	return saToken(ctx, t, admin, "slipway-update-agent", pod)
}

// saToken mints a token for ServiceAccount sa, bound to pod when it is not nil.
func saToken(ctx context.Context, t *testing.T, admin kubernetes.Interface, sa string, pod *corev1.Pod) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{}
	if pod != nil {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// podOf creates pod name of ServiceAccount sa, scheduled on node (no kubelet runs it: its token is
// what the test wants, bound to a scheduled pod as the kubelet's projected token is).
func podOf(ctx context.Context, t *testing.T, admin kubernetes.Interface, sa, name, node string) *corev1.Pod {
	t.Helper()
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa,
			Containers: []corev1.Container{{Name: "c", Image: "slipway"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// whoAmI is what the API server authenticated c as.
func whoAmI(ctx context.Context, t *testing.T, c kubernetes.Interface) authenticationv1.UserInfo {
	t.Helper()
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.UserInfo
}

const nodeClaim = "authentication.kubernetes.io/node-name"

// TestAgentPolicy proves base/agent-policy.yaml on a real API server with the agent's real credential:
// a TokenRequest token bound to an agent Pod scheduled on node agent-a, used alone.
func TestAgentPolicy(t *testing.T) {
	ctx := context.Background()
	cp := controlPlane(t)
	admin := cp.Client()
	for _, n := range []string{"agent-a", "agent-b"} {
		if _, err := testenv.CreateNode(ctx, admin, n, "boot-"+n, nil); err != nil {
			t.Fatal(err)
		}
	}
	agent := tokenClient(cp, agentToken(ctx, t, admin, podOf(ctx, t, admin, "slipway-update-agent", "update-agent-a", "agent-a")))
	unbound := tokenClient(cp, agentToken(ctx, t, admin, nil))
	operator := as(t, cp, "slipway-update-operator")

	// The credentials are what the test means them to be.
	const user = "system:serviceaccount:" + ns + ":slipway-update-agent"
	if u := whoAmI(ctx, t, agent); u.Username != user || !slices.Equal(u.Extra[nodeClaim], authenticationv1.ExtraValue{"agent-a"}) {
		t.Fatalf("the bound token authenticates as %s with %s=%v, want %s with [agent-a]", u.Username, nodeClaim, u.Extra[nodeClaim], user)
	}
	if u := whoAmI(ctx, t, unbound); u.Username != user || u.Extra[nodeClaim] != nil {
		t.Fatalf("the unbound token authenticates as %s with %s=%v, want %s without it", u.Username, nodeClaim, u.Extra[nodeClaim], user)
	}

	// A new policy is enforced once the API server has compiled it: wait (dry run, so nothing is
	// written while it is not) until the agent is refused another node.
	probe := []byte(`{"metadata":{"annotations":{"` + protocol.Status + `":"probe"}}}`)
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = agent.CoreV1().Nodes().Patch(ctx, "agent-b", types.MergePatchType, probe, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), "ValidatingAdmissionPolicy 'slipway-update-agent'"), nil
	}); err != nil {
		t.Fatalf("the agent's patch of another node is not refused by the policy after 1m (last answer: %v)", last)
	}

	// Keys an admin and the operator put there, which the agent must leave alone (an admin writing the
	// operator's key says who and why: the keys policy).
	seed := `{"metadata":{"labels":{"node-role.kubernetes.io/worker":""},"annotations":{"` + protocol.RebootPaused + `":"true","` + protocol.Cordoned + `":"false","` +
		protocol.Override + `":"` + whoAmI(ctx, t, admin).Username + `: seeding the test"}}}`
	for _, n := range []string{"agent-a", "agent-b"} {
		if _, err := admin.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(seed), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("agent writes its own keys on its own node", func(t *testing.T) {
		// Through the agent's own patch plumbing: a node that had none of the agent's keys gets all of them.
		n, err := admin.CoreV1().Nodes().Get(ctx, "agent-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var p nodes.Patch
		for _, k := range []string{protocol.RebootNeeded, protocol.RebootInProgress, protocol.Status, protocol.LastCheckedTime, protocol.NewVersion, protocol.AgentVersion, protocol.BootID, protocol.RebootError} {
			p.SetAnnotation(n, k, "v-"+k[strings.LastIndex(k, "/")+1:])
		}
		for _, k := range agentLabelKeys {
			p.SetLabel(n, k, "v")
		}
		p.SetAnnotation(n, protocol.RebootNeeded, protocol.True)
		p.SetLabel(n, protocol.RebootNeeded, protocol.True)
		p.ResourceVersion = n.ResourceVersion
		if _, err := p.Apply(ctx, agent, n); err != nil {
			t.Fatalf("the agent cannot write its own keys: %v", err)
		}
		// Changing and removing its own keys.
		n, _ = admin.CoreV1().Nodes().Get(ctx, "agent-a", metav1.GetOptions{})
		p = nodes.Patch{}
		p.SetAnnotation(n, protocol.RebootNeeded, protocol.False)
		p.SetLabel(n, protocol.RebootNeeded, protocol.False)
		p.DeleteAnnotation(n, protocol.RebootError)
		p.DeleteLabel(n, protocol.Group)
		out, err := p.Apply(ctx, agent, n)
		if err != nil {
			t.Fatalf("the agent cannot change or remove its own keys: %v", err)
		}
		if _, has := out.Annotations[protocol.RebootError]; has || out.Annotations[protocol.RebootNeeded] != protocol.False || out.Labels[protocol.RebootNeeded] != protocol.False {
			t.Errorf("the agent's writes did not land: %v %v", out.Annotations, out.Labels)
		}
		if out.Annotations[protocol.RebootPaused] != "true" || out.Labels["node-role.kubernetes.io/worker"] != "" {
			t.Errorf("foreign keys changed: %v %v", out.Annotations, out.Labels)
		}
	})

	// Grant the agent nodes/status for one case below: RBAC refuses it in the shipped install (see
	// TestRenderedRBAC); here the policy has to refuse it on its own.
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-agent-node-status"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-agent-node-status"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "test-agent-node-status"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "slipway-update-agent", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	ann := func(kv ...string) string {
		var parts []string
		for i := 0; i < len(kv); i += 2 {
			parts = append(parts, `"`+kv[i]+`":"`+kv[i+1]+`"`)
		}
		return `{"metadata":{"annotations":{` + strings.Join(parts, ",") + `}}}`
	}
	lbl := func(k, v string) string { return `{"metadata":{"labels":{"` + k + `":"` + v + `"}}}` }
	for _, c := range []struct {
		name, node, body, sub string
		client                kubernetes.Interface
		why                   string // in the refusal's message
	}{
		{"another node, even an agent key", "agent-b", ann(protocol.Status, "x"), "", agent, "may change only its own Node, not agent-b"},
		{"another node, the FLUO reboot", "agent-b", ann(protocol.RebootNeeded, "true", protocol.RebootOK, "true"), "", agent, "may change only its own Node"},
		{"own reboot-ok", "agent-a", ann(protocol.RebootOK, "true"), "", agent, "annotations the update-agent does not own: " + protocol.RebootOK},
		{"own reboot-needed with reboot-ok", "agent-a", ann(protocol.RebootNeeded, "true", protocol.RebootOK, "true"), "", agent, "does not own: " + protocol.RebootOK},
		{"cordon", "agent-a", `{"spec":{"unschedulable":true}}`, "", agent, "may not change a Node's spec"},
		{"taint", "agent-a", `{"spec":{"taints":[{"key":"example.com/x","effect":"NoSchedule"}]}}`, "", agent, "may not change a Node's spec"},
		{"node-role label", "agent-a", lbl("node-role.kubernetes.io/x", ""), "", agent, "labels the update-agent does not own: node-role.kubernetes.io/x"},
		{"FleetLock enrolment label", "agent-a", lbl(protocol.FleetLockEnrolled, "true"), "", agent, "labels the update-agent does not own: " + protocol.FleetLockEnrolled},
		{"an agent annotation key as a label", "agent-a", lbl(protocol.Status, "x"), "", agent, "labels the update-agent does not own: " + protocol.Status},
		{"an agent label key as an annotation", "agent-a", ann(protocol.Group, "x"), "", agent, "annotations the update-agent does not own: " + protocol.Group},
		{"operator's reboot-boot-id", "agent-a", ann(protocol.RebootBootID, "boot-agent-a"), "", agent, "does not own: " + protocol.RebootBootID},
		{"operator's cordoned", "agent-a", ann(protocol.Cordoned, "true"), "", agent, "does not own: " + protocol.Cordoned},
		{"removing the admin's reboot-paused", "agent-a", `{"metadata":{"annotations":{"` + protocol.RebootPaused + `":null}}}`, "", agent, "does not own: " + protocol.RebootPaused},
		{"removing a foreign label", "agent-a", `{"metadata":{"labels":{"node-role.kubernetes.io/worker":null}}}`, "", agent, "labels the update-agent does not own: node-role.kubernetes.io/worker"},
		{"own keys smuggling a foreign one", "agent-a", ann(protocol.Status, "y", protocol.DrainError, "x"), "", agent, "does not own: " + protocol.DrainError},
		{"finalizer", "agent-a", `{"metadata":{"finalizers":["example.com/x"]}}`, "", agent, "only labels and annotations"},
		{"ownerReference", "agent-a", `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"00000000-0000-0000-0000-000000000001"}]}}`, "", agent, "only labels and annotations"},
		{"node status", "agent-a", `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"x","message":"x"}]}}`, "status", agent, "never writes nodes/status"},
		{"unbound token, own key on the pod's node", "agent-a", ann(protocol.Status, "x"), "", unbound, "no " + nodeClaim + " claim"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, err := admin.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var subs []string
			if c.sub != "" {
				subs = []string{c.sub}
			}
			_, err = c.client.CoreV1().Nodes().Patch(ctx, c.node, types.MergePatchType, []byte(c.body), metav1.PatchOptions{}, subs...)
			switch {
			case err == nil:
				t.Errorf("patch %s of %s was allowed", c.body, c.node)
			case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'slipway-update-agent'"):
				t.Errorf("refused, but not by the policy (want 403 from ValidatingAdmissionPolicy 'slipway-update-agent'): %v", err)
			case !strings.Contains(err.Error(), c.why):
				t.Errorf("refusal does not say %q: %v", c.why, err)
			}
			after, err := admin.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if after.ResourceVersion != before.ResourceVersion {
				t.Errorf("%s changed: annotations %v, labels %v, spec %+v", c.node, after.Annotations, after.Labels, after.Spec)
			}
		})
	}

	t.Run("operator is not confined by the agent's policy", func(t *testing.T) {
		// Every cycle step goes through the operator's identity (confined by its own policy).
		for _, n := range []string{"agent-a", "agent-b"} {
			var p nodes.Patch
			p.Annotations = map[string]*string{protocol.RebootOK: nodes.Str(protocol.True), protocol.Cordoned: nodes.Str(protocol.True)}
			p.Unschedulable = new(bool)
			*p.Unschedulable = true
			if _, err := p.Apply(ctx, operator, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
				t.Errorf("the operator cannot grant reboot-ok and cordon %s: %v", n, err)
			}
		}
	})
}
