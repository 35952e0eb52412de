package remediation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
)

// Cluster API's keys.
const (
	// SkipRemediation on a Machine: MachineHealthCheck does not remediate it (any value).
	SkipRemediation = "cluster.x-k8s.io/skip-remediation"
	// MachineOfNode and ClusterNamespaceOfNode: Cluster API writes them on each Node it backs.
	MachineOfNode          = "cluster.x-k8s.io/machine"
	ClusterNamespaceOfNode = "cluster.x-k8s.io/cluster-namespace"
	// SkipRemediationBy marks a skip-remediation Slipway set (its value: the node), so it removes
	// only its own: one set by a person or another tool stays.
	SkipRemediationBy = "update.slipway.dev/skip-remediation-for"
)

// Machine is Cluster API's sign: the node's Machine, in the management cluster, annotated
// cluster.x-k8s.io/skip-remediation for the cycle. Client is the management cluster's (a kubeconfig
// whose RBAC allows get, list and patch on machines only).
type Machine struct {
	Client   dynamic.Interface
	Resource schema.GroupVersionResource
}

// MachinesResource finds the machines resource at the version the management cluster prefers.
func MachinesResource(d discovery.DiscoveryInterface) (schema.GroupVersionResource, error) {
	groups, err := d.ServerGroups()
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("discovery of the management cluster: %w", err)
	}
	for _, g := range groups.Groups {
		if g.Name == "cluster.x-k8s.io" {
			return schema.GroupVersionResource{Group: g.Name, Version: g.PreferredVersion.Version, Resource: "machines"}, nil
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("the management cluster serves no cluster.x-k8s.io API: is this Cluster API's management cluster?")
}

// ErrNotBacking: the Machine the Node names backs another node. The node goes on without this fence
// (reported): a Node's annotations must neither steer the fence nor hold the node's reboot.
var ErrNotBacking = errors.New("the node's Machine does not back it")

func (c *Machine) Kind() string { return "capi-machine" }

func (c *Machine) Hold(ctx context.Context, n *corev1.Node, _ time.Time, _ time.Duration) (Mark, bool, error) {
	name, ns := n.Annotations[MachineOfNode], n.Annotations[ClusterNamespaceOfNode]
	if name == "" || ns == "" {
		return Mark{}, false, nil // no Machine backs this node
	}
	m := Mark{Node: n.Name, Namespace: ns, Name: name}
	machines := c.Client.Resource(c.Resource).Namespace(ns)
	cur, err := machines.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return m, false, fmt.Errorf("machine %s/%s: %w", ns, name, err)
	}
	// The Machine must say it backs this node: the Node's annotations are writable by more than
	// Cluster API, and must not steer Slipway's management-cluster credentials to another Machine.
	if ref, _, _ := unstructured.NestedString(cur.Object, "status", "nodeRef", "name"); ref != n.Name {
		return m, false, fmt.Errorf("%w: machine %s/%s backs node %q, not %q (status.nodeRef): not touched", ErrNotBacking, ns, name, ref, n.Name)
	}
	a := cur.GetAnnotations()
	if by, ok := a[SkipRemediationBy]; ok && by == n.Name {
		return m, true, nil
	}
	if _, ok := a[SkipRemediation]; ok {
		return m, false, nil // someone else's: it stays, and it is not Slipway's to remove
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": cur.GetResourceVersion(),
		"annotations":     map[string]any{SkipRemediation: "", SkipRemediationBy: n.Name},
	}})
	if _, err := machines.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: Holder}); err != nil {
		return m, false, fmt.Errorf("machine %s/%s: %w", ns, name, err)
	}
	return m, true, nil
}

func (c *Machine) Release(ctx context.Context, m Mark) error {
	machines := c.Client.Resource(c.Resource).Namespace(m.Namespace)
	cur, err := machines.Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ours := cur.GetAnnotations()[SkipRemediationBy]; !ours {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": cur.GetResourceVersion(),
		"annotations":     map[string]any{SkipRemediation: nil, SkipRemediationBy: nil},
	}})
	_, err = machines.Patch(ctx, m.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: Holder})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *Machine) Held(ctx context.Context) ([]Mark, error) {
	list, err := c.Client.Resource(c.Resource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []Mark
	for _, x := range list.Items {
		if node, ok := x.GetAnnotations()[SkipRemediationBy]; ok {
			out = append(out, Mark{Node: node, Namespace: x.GetNamespace(), Name: x.GetName()})
		}
	}
	return out, nil
}
