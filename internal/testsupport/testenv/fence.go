package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// InstallAdmissionFence creates the admission fence as the installs ship it (deploy/base/fence-policy.yaml:
// a write that sets admitted-by lands only in the leader Lease's current term), bound to the Lease
// leaseName in namespace, and returns once the API server enforces it.
//
// Enforced is proven, not assumed: a second binding of the same policy to a probe Lease must refuse a
// dry-run Node carrying another term (the policy compiled and its param informer runs), and then, gone,
// refuse nothing more (so it cannot refuse a real admission later).
func InstallAdmissionFence(ctx context.Context, c kubernetes.Interface, namespace, leaseName string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy/base/fence-policy.yaml"))
	if err != nil {
		return err
	}
	parts := strings.Split(string(raw), "\n---\n")
	if len(parts) != 2 {
		return fmt.Errorf("fence-policy.yaml: want a policy and a binding, got %d documents", len(parts))
	}
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict([]byte(parts[0]), &vap); err != nil {
		return fmt.Errorf("fence-policy.yaml: %w", err)
	}
	if err := yaml.UnmarshalStrict([]byte(parts[1]), &binding); err != nil {
		return fmt.Errorf("fence-policy.yaml: %w", err)
	}
	api := c.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, &vap, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the admission fence: %w", err)
	}

	// The probe: its own Lease and binding.
	const probe = "slipway-admission-fence-probe"
	holder, transitions := "probe", int32(0)
	if _, err := c.CoordinationV1().Leases(namespace).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: probe},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseTransitions: &transitions}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the fence's probe Lease: %w", err)
	}
	pb := binding.DeepCopy()
	pb.Name, pb.Spec.ParamRef.Namespace, pb.Spec.ParamRef.Name = probe, namespace, probe
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, pb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding the fence's probe: %w", err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: probe, Annotations: map[string]string{"update.slipway.dev/admitted-by": "nobody/0"}}}
	byProbe := func() (bool, error) {
		_, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "binding '"+probe+"'"), nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) { return byProbe() }); err != nil {
		return fmt.Errorf("the admission fence refuses nothing 1m after it was created: %w", err)
	}
	if err := api.ValidatingAdmissionPolicyBindings().Delete(ctx, probe, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := c.CoordinationV1().Leases(namespace).Delete(ctx, probe, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		refused, err := byProbe()
		return !refused, err
	}); err != nil {
		return fmt.Errorf("the fence's probe binding still refuses 1m after it was deleted: %w", err)
	}

	binding.Spec.ParamRef.Namespace, binding.Spec.ParamRef.Name = namespace, leaseName
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding the admission fence: %w", err)
	}
	if _, err := c.CoordinationV1().Leases(namespace).Get(ctx, leaseName, metav1.GetOptions{}); err != nil {
		return nil // no Lease yet: the binding lets everything pass until a leader creates it
	}
	// The Lease exists: the binding is enforced once it refuses another term.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "binding '"+binding.Name+"'"), nil
	}); err != nil {
		return fmt.Errorf("the admission fence's binding refuses nothing 1m after it was created: %w", err)
	}
	return nil
}

// HoldLease makes holder the holder of Lease namespace/name, renewed now for 15 s, in its
// transitions-th term (created when absent): a leader as the operator's fence and the admission
// fence see it.
func HoldLease(ctx context.Context, c kubernetes.Interface, namespace, name, holder string, transitions int32) error {
	now, d := metav1.NowMicro(), int32(15)
	spec := coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &now, AcquireTime: &now, LeaseTransitions: &transitions}
	leases := c.CoordinationV1().Leases(namespace)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: spec}, metav1.CreateOptions{})
	} else if err == nil {
		l.Spec = spec
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("holding Lease %s/%s for %s: %w", namespace, name, holder, err)
	}
	return nil
}
