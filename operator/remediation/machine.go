package remediation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Cluster API's keys.
const (
	// SkipRemediation on a Machine: MachineHealthCheck does not remediate it (any value).
	SkipRemediation = "cluster.x-k8s.io/skip-remediation"
	// MachineOfNode and ClusterNamespaceOfNode: Cluster API writes them on each Node it backs.
	MachineOfNode          = "cluster.x-k8s.io/machine"
	ClusterNamespaceOfNode = "cluster.x-k8s.io/cluster-namespace"
	// SkipRemediationBy marks a skip-remediation Slipway set, so it removes only its own: one set by a
	// person or another tool stays. Its value is "<cluster>/<node>": the workload cluster's identity
	// (its kube-system namespace's UID) and the node, so the Slipway of another workload cluster
	// managed from the same management cluster never takes this one's marks for its own.
	SkipRemediationBy = "update.slipway.dev/skip-remediation-for"
)

// Machine is Cluster API's sign: the node's Machine, in the management cluster, annotated
// cluster.x-k8s.io/skip-remediation for the cycle. Client is the management cluster's (a kubeconfig
// whose RBAC allows get, list and patch on machines only).
type Machine struct {
	Client   dynamic.Interface
	Resource schema.GroupVersionResource
	// Cluster is this workload cluster's identity (ClusterIdentity), the prefix of its marks.
	Cluster string
	// Namespace, when set, is the only namespace of the management cluster whose Machines are touched
	// or listed (the workload cluster's; RBAC may then be a Role there).
	Namespace string
	// Timeout bounds each call to the management cluster (DefaultMachineTimeout when 0).
	Timeout time.Duration
}

// DefaultMachineTimeout bounds one call to the management cluster.
const DefaultMachineTimeout = 10 * time.Second

// ClusterIdentity is the workload cluster's identity: the UID of its kube-system namespace.
func ClusterIdentity(ctx context.Context, c kubernetes.Interface) (string, error) {
	ns, err := c.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading namespace kube-system (its UID names this cluster's marks on Machines): %w", err)
	}
	return string(ns.UID), nil
}

func (c *Machine) mark(node string) string { return c.Cluster + "/" + node }

func (c *Machine) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	t := c.Timeout
	if t <= 0 {
		t = DefaultMachineTimeout
	}
	return context.WithTimeout(ctx, t)
}

// DefaultMachinesResource is Cluster API's machines at v1beta2 (its storage version since v1.11), for a
// management cluster that cannot be asked at start.
var DefaultMachinesResource = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}

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
	if c.Namespace != "" && ns != c.Namespace {
		return m, false, fmt.Errorf("%w: the node names a Machine in namespace %q, not this cluster's %q: not touched", ErrNotBacking, ns, c.Namespace)
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	machines := c.Client.Resource(c.Resource).Namespace(ns)
	cur, err := machines.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return m, false, fmt.Errorf("%w: machine %s/%s: %v", ErrNotBacking, ns, name, err)
	}
	if err != nil {
		return m, false, fmt.Errorf("machine %s/%s: %w", ns, name, err)
	}
	// The Machine must say it backs this node: the Node's annotations are writable by more than
	// Cluster API, and must not steer Slipway's management-cluster credentials to another Machine.
	// Its nodeRef names the node, and its providerID (immutable on the Node once set) is the Node's.
	ref, _, _ := unstructured.NestedString(cur.Object, "status", "nodeRef", "name")
	pid, _, _ := unstructured.NestedString(cur.Object, "spec", "providerID")
	if ref != n.Name || pid != n.Spec.ProviderID {
		return m, false, fmt.Errorf("%w: machine %s/%s (nodeRef %q, providerID %q) does not back node %q (providerID %q): not touched",
			ErrNotBacking, ns, name, ref, pid, n.Name, n.Spec.ProviderID)
	}
	a := cur.GetAnnotations()
	if by, ok := a[SkipRemediationBy]; ok && by == c.mark(n.Name) {
		return m, true, nil
	}
	if _, ok := a[SkipRemediation]; ok {
		return m, false, nil // someone else's: it stays, and it is not Slipway's to remove
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": cur.GetResourceVersion(),
		"annotations":     map[string]any{SkipRemediation: "", SkipRemediationBy: c.mark(n.Name)},
	}})
	if _, err := machines.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: Holder}); err != nil {
		return m, false, fmt.Errorf("machine %s/%s: %w", ns, name, err)
	}
	return m, true, nil
}

func (c *Machine) Release(ctx context.Context, m Mark) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	machines := c.Client.Resource(c.Resource).Namespace(m.Namespace)
	cur, err := machines.Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.GetAnnotations()[SkipRemediationBy] != c.mark(m.Node) {
		return nil // not this cluster's mark for this node (another cluster's, or none)
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
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	list, err := c.Client.Resource(c.Resource).Namespace(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []Mark
	for _, x := range list.Items {
		if node, ok := strings.CutPrefix(x.GetAnnotations()[SkipRemediationBy], c.Cluster+"/"); ok && c.Cluster != "" {
			out = append(out, Mark{Node: node, Namespace: x.GetNamespace(), Name: x.GetName()})
		}
	}
	return out, nil
}
