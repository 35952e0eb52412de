package deploy

import (
	"context"
	"os"
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
	"sigs.k8s.io/yaml"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

const keysPolicy = "slipway-node-keys"

// The keys policy's lists are protocol.Owners': every operator key (annotations; before-reboot and
// after-reboot as labels) and every agent key, so a key added there is protected here.
func TestKeysPolicyKeys(t *testing.T) {
	b, err := os.ReadFile("base/keys-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := yaml.Unmarshal([]byte(strings.Split(string(b), "\n---\n")[0]), &vap); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, v := range vap.Spec.Variables {
		vars[v.Name] = v.Expression
	}
	operatorLabels := []string{protocol.BeforeReboot, protocol.AfterReboot}
	var wantOpAnn []string
	for k, w := range protocol.Owners {
		if w == protocol.WriterOperator && !slices.Contains(operatorLabels, k) {
			wantOpAnn = append(wantOpAnn, k)
		}
	}
	sort.Strings(wantOpAnn)
	sort.Strings(operatorLabels)
	agentAnn, agentLabels := policyKeys(t) // agent-policy.yaml's, which TestAgentPolicyKeys holds to Owners
	for name, want := range map[string][]string{"operatorAnnotations": wantOpAnn, "operatorLabels": operatorLabels, "agentAnnotations": agentAnn, "agentLabels": agentLabels} {
		if got := quotedIn(vars[name]); !slices.Equal(got, want) {
			t.Errorf("keys-policy.yaml %s = %q,\nwant %q", name, got, want)
		}
	}
}

// TestKeysPolicy proves base/keys-policy.yaml on a real API server with real identities, each used
// alone: a kubelet's client certificate (system:node:keys-a in system:nodes), a user whose only right is
// to patch Nodes (a client certificate), the operator's and the agent's pod-bound ServiceAccount tokens,
// and a person in the break-glass group. Refused writes change nothing.
func TestKeysPolicy(t *testing.T) {
	ctx := context.Background()
	cp := controlPlane(t)
	admin := cp.Client()
	for _, n := range []string{"keys-a", "keys-b"} {
		if _, err := testenv.CreateNode(ctx, admin, n, "boot-"+n, nil); err != nil {
			t.Fatal(err)
		}
	}
	// RBAC gives each identity "patch nodes" (in a real cluster the Node authorizer gives a kubelet its
	// own Node): what is refused below is refused by the policy, not by RBAC.
	grant := func(name string, subject rbacv1.Subject) {
		t.Helper()
		if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch", "update"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{subject}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	grant("test-keys-kubelets", rbacv1.Subject{Kind: "Group", Name: "system:nodes", APIGroup: "rbac.authorization.k8s.io"})
	grant("test-keys-patcher", rbacv1.Subject{Kind: "User", Name: "patcher", APIGroup: "rbac.authorization.k8s.io"})
	grant("test-keys-oncall", rbacv1.Subject{Kind: "User", Name: "oncall", APIGroup: "rbac.authorization.k8s.io"})
	certClient := func(user string, groups ...string) kubernetes.Interface {
		t.Helper()
		cfg, err := cp.ClientConfig(user, groups...)
		if err != nil {
			t.Fatal(err)
		}
		return kubernetes.NewForConfigOrDie(cfg)
	}
	kubelet := certClient("system:node:keys-a", "system:nodes")
	patcher := certClient("patcher")
	oncall := certClient("oncall", "slipway:break-glass")
	operator := tokenClient(cp, saToken(ctx, t, admin, "slipway-update-operator", podOf(ctx, t, admin, "slipway-update-operator", "update-operator-keys", "keys-b")))
	agent := tokenClient(cp, agentToken(ctx, t, admin, podOf(ctx, t, admin, "slipway-update-agent", "update-agent-keys-a", "keys-a")))
	if u := whoAmI(ctx, t, kubelet); u.Username != "system:node:keys-a" || !slices.Contains(u.Groups, "system:nodes") {
		t.Fatalf("the kubelet certificate authenticates as %s %v", u.Username, u.Groups)
	}
	if u := whoAmI(ctx, t, patcher); u.Username != "patcher" || slices.Contains(u.Groups, "system:masters") {
		t.Fatalf("the patcher authenticates as %s %v", u.Username, u.Groups)
	}

	// Enforced once the API server compiled it: wait (dry run) until the patcher is refused reboot-ok.
	grantOK := []byte(`{"metadata":{"annotations":{"` + protocol.RebootOK + `":"true"}}}`)
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = patcher.CoreV1().Nodes().Patch(ctx, "keys-a", types.MergePatchType, grantOK, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), "ValidatingAdmissionPolicy '"+keysPolicy+"'"), nil
	}); err != nil {
		t.Fatalf("a plain patch-nodes user's reboot-ok is not refused by the policy after 1m (last answer: %v)", last)
	}

	// The operator's marks as a cycle leaves them, put there by the break-glass admin (who says who and why).
	seed := map[string]string{protocol.FailedVersion: "4600.0.0", protocol.RebootFailed: "2026-11-26T03:00:00Z old-version: ...",
		protocol.AdmittedGroup: "zone-a", protocol.Cordoned: protocol.True,
		protocol.Override: whoAmI(ctx, t, admin).Username + ": seeding the test"}
	for _, n := range []string{"keys-a", "keys-b"} {
		var p nodes.Patch
		for k, v := range seed {
			p.SetAnnotation(nil, k, v)
		}
		if _, err := p.Apply(ctx, admin, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	type write struct {
		what string
		do   func(p *nodes.Patch, n *corev1.Node)
	}
	annotate := func(k, v string) write {
		return write{"annotation " + k + "=" + v, func(p *nodes.Patch, n *corev1.Node) { p.SetAnnotation(n, k, v) }}
	}
	unannotate := func(k string) write {
		return write{"remove annotation " + k, func(p *nodes.Patch, n *corev1.Node) { p.DeleteAnnotation(n, k) }}
	}
	label := func(k, v string) write {
		return write{"label " + k + "=" + v, func(p *nodes.Patch, n *corev1.Node) { p.SetLabel(n, k, v) }}
	}
	try := func(c kubernetes.Interface, node string, w write) error {
		t.Helper()
		before, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var p nodes.Patch
		w.do(&p, before)
		_, err = p.Apply(ctx, c, before)
		if err != nil {
			after, _ := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if after.ResourceVersion != before.ResourceVersion {
				t.Errorf("%s on %s was refused but changed the Node", w.what, node)
			}
		}
		return err
	}
	refused := func(who string, c kubernetes.Interface, node string, w write, says string) {
		t.Helper()
		err := try(c, node, w)
		if err == nil {
			t.Errorf("%s: %s on %s was allowed", who, w.what, node)
		} else if !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %s on %s refused with %q, want it to say %q", who, w.what, node, err, says)
		}
	}
	allowed := func(who string, c kubernetes.Interface, node string, w write) {
		t.Helper()
		if err := try(c, node, w); err != nil {
			t.Errorf("%s: %s on %s refused: %v", who, w.what, node, err)
		}
	}
	byOperator := "ValidatingAdmissionPolicy '" + keysPolicy + "'"

	t.Run("a user with patch nodes", func(t *testing.T) {
		for _, w := range []write{
			annotate(protocol.RebootOK, protocol.True), // an undrained reboot outside every budget
			unannotate(protocol.FailedVersion),         // the node's own hold lifted
			unannotate(protocol.RebootFailed),
			annotate(protocol.AdmittedGroup, "zone-b"), // a slot moved to another pool
			annotate(protocol.LastRebootTime, "2020-01-01T00:00:00Z"),
			label(protocol.BeforeReboot, protocol.True),
		} {
			refused("patcher", patcher, "keys-a", w, byOperator)
		}
		// The agent's keys but reboot-needed: a forged reboot-in-progress (a slot held on an agentless
		// FleetLock node), status or new-version (a version asked for) are the agent's word alone.
		for _, w := range []write{
			annotate(protocol.RebootInProgress, protocol.True),
			annotate(protocol.Status, "UPDATE_STATUS_UPDATED_NEED_REBOOT"),
			annotate(protocol.NewVersion, "9999.9.9"),
			label(protocol.Version, "9999.9.9"),
		} {
			refused("patcher", patcher, "keys-a", w, "belong to the update-agent; only its ServiceAccount writes them")
		}
		// What a person may still do: ask for a reboot as FLUO's README does, pause a node, cordon it,
		// label it for their own ends.
		allowed("patcher", patcher, "keys-a", annotate(protocol.RebootNeeded, protocol.True))
		allowed("patcher", patcher, "keys-a", annotate(protocol.RebootPaused, protocol.True))
		allowed("patcher", patcher, "keys-a", label("team", "payments"))
		allowed("patcher", patcher, "keys-a", write{"cordon", func(p *nodes.Patch, n *corev1.Node) { p.SetUnschedulable(n, true) }})
	})
	// A ServiceAccount named like the operator's, in a tenant's namespace, with "patch nodes": none of
	// Slipway's, so the operator's keys are refused it (matched by name alone, it passed as Slipway's).
	t.Run("the operator's name in another namespace", func(t *testing.T) {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if _, err := admin.CoreV1().ServiceAccounts("tenant").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "slipway-update-operator"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		grant("test-keys-impostor", rbacv1.Subject{Kind: "ServiceAccount", Name: "slipway-update-operator", Namespace: "tenant"})
		tr, err := admin.CoreV1().ServiceAccounts("tenant").CreateToken(ctx, "slipway-update-operator", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		impostor := tokenClient(cp, tr.Status.Token)
		// The API server's RBAC cache takes a moment to see the new binding: what is refused below must
		// be refused by the policy, not by RBAC.
		for deadline := time.Now().Add(30 * time.Second); !can(t, impostor, "patch", "", "nodes", "", ""); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the impostor's ClusterRoleBinding never took effect")
			}
		}
		if u := whoAmI(ctx, t, impostor); u.Username != "system:serviceaccount:tenant:slipway-update-operator" {
			t.Fatalf("the impostor authenticates as %s", u.Username)
		}
		refused("impostor", impostor, "keys-a", annotate(protocol.RebootOK, protocol.True), byOperator)
		refused("impostor", impostor, "keys-a", annotate(protocol.RebootInProgress, protocol.True), "belong to the update-agent")
	})
	t.Run("a kubelet", func(t *testing.T) {
		for _, w := range []write{annotate(protocol.RebootOK, protocol.True), unannotate(protocol.FailedVersion), label(protocol.AfterReboot, protocol.True)} {
			refused("kubelet", kubelet, "keys-a", w, byOperator)
		}
		// The agent's keys: the kubelet's identity is reachable by root on the node, the agent's token
		// is confined to its own keys by agent-policy.yaml; the kubelet gets none of them.
		for _, w := range []write{annotate(protocol.RebootNeeded, protocol.False), annotate(protocol.BootID, "forged"), label(protocol.Version, "4600.0.0"), annotate(protocol.NewVersion, "4600.0.0")} {
			refused("kubelet", kubelet, "keys-a", w, "belong to the update-agent; a kubelet (system:node:keys-a) may not write them")
		}
		allowed("kubelet", kubelet, "keys-a", annotate("node.alpha.kubernetes.io/ttl", "0"))
	})
	t.Run("the operator", func(t *testing.T) {
		allowed("operator", operator, "keys-a", annotate(protocol.RebootOK, protocol.True))
		allowed("operator", operator, "keys-a", unannotate(protocol.FailedVersion))
		allowed("operator", operator, "keys-a", label(protocol.BeforeReboot, protocol.True))
	})
	t.Run("the agent", func(t *testing.T) {
		allowed("agent", agent, "keys-a", annotate(protocol.Status, "UPDATE_STATUS_IDLE"))
		refused("agent", agent, "keys-a", annotate(protocol.RebootOK, protocol.False), "ValidatingAdmissionPolicy 'slipway-update-agent'")
	})
	t.Run("break-glass", func(t *testing.T) {
		// An override says who (the API server checks the username) and why, set anew in the same write.
		with := func(w write, override string) write {
			return write{w.what + " with override " + override, func(p *nodes.Patch, n *corev1.Node) {
				w.do(p, n)
				p.SetAnnotation(n, protocol.Override, override)
			}}
		}
		allowed("oncall", oncall, "keys-b", with(unannotate(protocol.FailedVersion), "oncall: the release was fine, INC-42"))
		allowed("oncall", oncall, "keys-b", with(annotate(protocol.RebootOK, protocol.False), "oncall: stop this reboot, INC-43"))
		allowed("oncall", oncall, "keys-b", annotate(protocol.RebootInProgress, protocol.False)) // an agent's key mended in an emergency
		mustSay := "must say who and why in the same write: update.slipway.dev/override=\"oncall: <why>\""
		refused("oncall", oncall, "keys-b", unannotate(protocol.RebootFailed), mustSay)                                           // no override at all
		refused("oncall", oncall, "keys-b", with(unannotate(protocol.RebootFailed), "oncall: stop this reboot, INC-43"), mustSay) // the last one's, not set anew
		refused("oncall", oncall, "keys-b", with(unannotate(protocol.RebootFailed), "admin: as if someone else"), mustSay)        // another name
		refused("oncall", oncall, "keys-b", with(unannotate(protocol.RebootFailed), "oncall: "), mustSay)                         // no why
		// A Node created (registered again after a delete) with the operator's keys on it is a write of
		// them too: refused without a valid override, even to the break-glass admin.
		adminName := whoAmI(ctx, t, admin).Username
		create := func(name string, ann map[string]string) error {
			_, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
		if err := create("keys-new", map[string]string{protocol.RebootOK: protocol.True}); err == nil || !strings.Contains(err.Error(), "must say who and why") {
			t.Errorf("a Node created with reboot-ok=true and no override: %v, want refused", err)
		}
		if err := create("keys-new", map[string]string{protocol.Override: "oncall: forged"}); err == nil {
			t.Error("a Node created with an override naming someone else was allowed")
		}
		if err := create("keys-new", map[string]string{protocol.RebootOK: protocol.True, protocol.Override: adminName + ": restoring a node"}); err != nil {
			t.Errorf("a break-glass Node created with the operator's keys and its own override: %v", err)
		}
		if err := create("keys-new", nil); err != nil {
			t.Errorf("a plain Node registration refused: %v", err)
		}
		// Without the group, an override changes nothing: the operator's keys stay the operator's.
		refused("patcher", patcher, "keys-b", with(unannotate(protocol.RebootFailed), "patcher: please"), byOperator)
	})
}
