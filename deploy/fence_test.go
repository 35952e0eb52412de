package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

const fencePolicy = "slipway-admission-fence"

// TestAdmissionFence proves base/fence-policy.yaml on a real API server: an admission (admitted-by set
// to a new term) lands only in the Lease's current term, as the operator's own ServiceAccount token or
// anyone else; a stale leader's admission delivered after a successor took the Lease is refused and
// changes nothing; a node admitted in an earlier term carries on under the successor (its other writes
// pass); removing admitted-by at a cycle's end always passes; with no Lease (no leader yet) nothing is
// refused.
func TestAdmissionFence(t *testing.T) {
	ctx := context.Background()
	cp := controlPlane(t)
	admin := cp.Client()
	for _, n := range []string{"fence-a", "fence-b", "fence-c", "fence-e"} {
		if _, err := testenv.CreateNode(ctx, admin, n, "boot-"+n, nil); err != nil {
			t.Fatal(err)
		}
	}
	op := tokenClient(cp, saToken(ctx, t, admin, "slipway-update-operator", podOf(ctx, t, admin, "slipway-update-operator", "update-operator-fence", "fence-a")))

	leases := admin.CoordinationV1().Leases(ns)
	setLease := func(holder string, transitions int32) {
		t.Helper()
		if err := testenv.HoldLease(ctx, admin, ns, "slipway-update-operator", holder, transitions); err != nil {
			t.Fatal(err)
		}
	}
	admit := func(c kubernetes.Interface, node, term string) error {
		t.Helper()
		before, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// What the operator's admission writes, with its precondition.
		p := nodes.Patch{ResourceVersion: before.ResourceVersion}
		p.SetAnnotation(before, protocol.AdmittedBy, term)
		p.SetAnnotation(before, protocol.CycleStarted, "2026-11-26T03:00:00Z")
		p.SetLabel(before, protocol.BeforeReboot, protocol.True)
		_, err = p.Apply(ctx, c, before)
		if err != nil {
			after, _ := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if after.ResourceVersion != before.ResourceVersion {
				t.Errorf("the refused admission of %s in term %s changed the Node", node, term)
			}
		}
		return err
	}
	refused := func(c kubernetes.Interface, node, term, says string) {
		t.Helper()
		err := admit(c, node, term)
		if err == nil {
			t.Errorf("the admission of %s in term %s was allowed", node, term)
		} else if !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+fencePolicy+"'") || !strings.Contains(err.Error(), says) {
			t.Errorf("the admission of %s in term %s refused with %q, want the fence saying %q", node, term, err, says)
		}
	}
	end := func(c kubernetes.Interface, node string) {
		t.Helper()
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := nodes.Patch{ResourceVersion: n.ResourceVersion}
		p.DeleteAnnotation(n, protocol.AdmittedBy)
		p.DeleteAnnotation(n, protocol.CycleStarted)
		p.DeleteLabel(n, protocol.BeforeReboot)
		if _, err := p.Apply(ctx, c, n); err != nil {
			t.Errorf("ending the cycle of %s (admitted-by removed) refused: %v", node, err)
		}
	}

	setLease("op-1", 3)
	// Enforced once the API server compiled the policy and its param informer shows this Lease: wait
	// (dry run) until another holder's term is refused.
	var last error
	answers := map[string]int{}
	probe := []byte(`{"metadata":{"annotations":{"` + protocol.AdmittedBy + `":"op-2/3"}}}`)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		// As the operator: the keys policy refuses anyone else's admitted-by, and which of two refusing
		// policies the API server names is not fixed.
		_, last = op.CoreV1().Nodes().Patch(ctx, "fence-c", "application/merge-patch+json", probe, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		answers[fmt.Sprint(last)]++
		return last != nil && strings.Contains(last.Error(), "ValidatingAdmissionPolicy '"+fencePolicy+"'"), nil
	}); err != nil {
		b, _ := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, fencePolicy, metav1.GetOptions{})
		l, lerr := leases.Get(ctx, "slipway-update-operator", metav1.GetOptions{})
		t.Fatalf("the fence does not refuse another holder's term after 1m (answers %v; binding %+v; Lease %+v %v)", answers, b.Spec, l.Spec, lerr)
	}

	// fence-e keeps the admitted-by of a cycle it finished in this term under an operator that did not
	// remove it at the end (releases before the fence).
	seed := []byte(`{"metadata":{"annotations":{"` + protocol.AdmittedBy + `":"op-1/3"}}}`)
	if _, err := op.CoreV1().Nodes().Patch(ctx, "fence-e", "application/merge-patch+json", seed, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("the current term admits", func(t *testing.T) {
		if err := admit(op, "fence-a", "op-1/3"); err != nil {
			t.Fatalf("the leader's admission in its own term refused: %v", err)
		}
	})
	t.Run("other terms are refused", func(t *testing.T) {
		refused(op, "fence-b", "op-1/2", "leader Lease is in term op-1/3") // an earlier term of the same holder
		refused(op, "fence-b", "op-2/3", "leader Lease is in term op-1/3") // another instance
		// Whoever writes it: a person with break-glass, who says who and why (the keys policy lets that
		// through), is fenced too.
		breakGlass := []byte(`{"metadata":{"annotations":{"` + protocol.AdmittedBy + `":"op-2/4","` + protocol.Override + `":"` + whoAmI(ctx, t, admin).Username + `: testing the fence"}}}`)
		if _, err := admin.CoreV1().Nodes().Patch(ctx, "fence-b", "application/merge-patch+json", breakGlass, metav1.PatchOptions{}); err == nil ||
			!strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+fencePolicy+"'") {
			t.Errorf("a break-glass admission in another term: %v, want the fence's refusal", err)
		}
	})

	// The leader is cut off; a successor takes the Lease and admits fence-c; the old leader's admission
	// of fence-b arrives afterwards.
	setLease("op-2", 4)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return admit(op, "fence-c", "op-2/4") == nil, nil
	}); err != nil {
		t.Fatalf("the successor's admission in term op-2/4 is not allowed after 1m")
	}
	t.Run("a stale leader's admission delivered late", func(t *testing.T) {
		refused(op, "fence-b", "op-1/3", "admitted in leadership term op-1/3 but the leader Lease is in term op-2/4")
		// admitted-by unchanged, but the write starts a cycle: an admission all the same.
		refused(op, "fence-e", "op-1/3", "admitted in leadership term op-1/3 but the leader Lease is in term op-2/4")
	})
	t.Run("a node admitted in the earlier term carries on", func(t *testing.T) {
		n, err := admin.CoreV1().Nodes().Get(ctx, "fence-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := nodes.Patch{ResourceVersion: n.ResourceVersion}
		p.SetUnschedulable(n, true)
		p.SetAnnotation(n, protocol.Cordoned, protocol.True)
		if _, err := p.Apply(ctx, op, n); err != nil {
			t.Errorf("the successor's cordon of fence-a (admitted-by op-1/3 unchanged) refused: %v", err)
		}
		end(op, "fence-a")
		end(op, "fence-c")
	})
	t.Run("no Lease: nothing fenced, nothing refused", func(t *testing.T) {
		// Before the first operator creates its Lease the policy must stand aside: the API server looks
		// the Lease up before matchConditions, so every Node write (a kubelet registering) depends on it.
		if err := leases.Delete(ctx, "slipway-update-operator", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return admit(op, "fence-a", "op-3/5") == nil, nil
		}); err != nil {
			t.Fatalf("with no leader Lease an admission is still refused after 1m")
		}
		if _, err := testenv.CreateNode(ctx, admin, "fence-d", "boot-fence-d", nil); err != nil {
			t.Errorf("a Node registered with no Lease: %v", err)
		}
	})
	for _, n := range []string{"fence-a", "fence-b", "fence-c", "fence-d", "fence-e"} {
		if err := admin.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}
}

// An overlay that installs Slipway in another namespace moves the fence's Lease reference with it
// (base/kustomizeconfig.yaml): otherwise the fence would look for a Lease no operator holds and let
// every stale admission through.
func TestFenceFollowsTheNamespace(t *testing.T) {
	fs := filesys.MakeFsInMemory()
	files, err := filepath.Glob("base/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("base/*.yaml: %v", err)
	}
	crds, _ := filepath.Glob("base/crd/*.yaml")
	for _, f := range append(files, crds...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.WriteFile("/d/"+f, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.WriteFile("/d/overlay/kustomization.yaml", []byte("namespace: ops\nresources: [../base]\n")); err != nil {
		t.Fatal(err)
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/d/overlay")
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range rm.Resources() {
		if r.GetKind() != "ValidatingAdmissionPolicyBinding" || r.GetName() != fencePolicy {
			continue
		}
		found = true
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := m["spec"].(map[string]any)["paramRef"].(map[string]any)
		if ref["namespace"] != "ops" || ref["name"] != "slipway-update-operator" {
			t.Errorf("the fence's binding names the Lease %v/%v, want ops/slipway-update-operator", ref["namespace"], ref["name"])
		}
	}
	if !found {
		t.Fatalf("the overlay renders no binding %s", fencePolicy)
	}
}
