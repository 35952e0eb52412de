package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// CreateNode registers a Node and reports it Ready with the given boot ID, as a kubelet would.
func CreateNode(ctx context.Context, c kubernetes.Interface, name, bootID string, labels map[string]string) (*corev1.Node, error) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating node %s: %w", name, err)
	}
	return SetNodeStatus(ctx, c, name, bootID, true)
}

// RegisterNode creates a Node that is Ready with the given boot ID from its first version on (status
// in the create request, as a kubelet registering a node that already runs sends it).
func RegisterNode(ctx context.Context, c kubernetes.Interface, name, bootID string, labels map[string]string) (*corev1.Node, error) {
	now := metav1.Now()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "stand-in kubelet", LastHeartbeatTime: now, LastTransitionTime: now}}
	n.Status.NodeInfo.BootID = bootID
	out, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("registering node %s: %w", name, err)
	}
	if !ready(out) || out.Status.NodeInfo.BootID != bootID {
		// The API server dropped the status of the create: write it as a kubelet would next.
		return SetNodeStatus(ctx, c, name, bootID, true)
	}
	return out, nil
}

// SetNodeStatus writes the Ready condition and status.nodeInfo.bootID through the status subresource.
func SetNodeStatus(ctx context.Context, c kubernetes.Interface, name, bootID string, ready bool) (*corev1.Node, error) {
	var out *corev1.Node
	err := retryConflict(ctx, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		now := metav1.Now()
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: status, Reason: "KubeletReady", Message: "stand-in kubelet",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		n.Status.NodeInfo.BootID = bootID
		out, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

func retryConflict(ctx context.Context, f func() error) error {
	var err error
	for i := 0; i < 10; i++ {
		if err = f(); err == nil {
			return nil
		}
		if werr := WaitCtx(ctx, 50*time.Millisecond); werr != nil {
			return werr
		}
	}
	return err
}

// PodKubelet does for every pod what the kubelet of its node would: bound pods become Running and
// Ready (Pending pods ignore PDBs, so without this no PDB would ever bite) and pods being deleted are
// finalized (without a kubelet, evicted pods stay Terminating forever and a drain never ends). Like a
// kubelet it keeps trying: a write that failed (the API server or etcd restarting) is made again at the
// next resync, every 2 s, or a pod would stay Pending for good and hold its PDB at zero.
func PodKubelet(ctx context.Context, c kubernetes.Interface) {
	f := informers.NewSharedInformerFactory(c, 2*time.Second)
	inf := f.Core().V1().Pods().Informer()
	handle := func(obj interface{}) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		if p.DeletionTimestamp != nil {
			zero := int64(0)
			_ = c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			return
		}
		if p.Status.Phase == corev1.PodRunning {
			return
		}
		q := p.DeepCopy()
		now := metav1.Now()
		q.Status.Phase = corev1.PodRunning
		q.Status.StartTime = &now
		q.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		_, _ = c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{})
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, n interface{}) { handle(n) },
	})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
}

// WaitPodsRunning waits until n pods matching selector in ns are Running and Ready.
func WaitPodsRunning(ctx context.Context, c kubernetes.Interface, ns, selector string, n int) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running >= n, nil
	})
}

// WaitNode polls the Node until cond holds. On timeout the error shows the node's last annotations,
// labels and cordon, which is usually what a failing test needs to say.
func WaitNode(ctx context.Context, c kubernetes.Interface, name string, timeout time.Duration, cond func(*corev1.Node) bool) (*corev1.Node, error) {
	var last *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n
		return cond(n), nil
	})
	if err != nil && last != nil {
		return last, fmt.Errorf("after %s: annotations %v labels %v unschedulable %v", timeout, last.Annotations, last.Labels, last.Spec.Unschedulable)
	}
	return last, err
}

// MustWaitNode is WaitNode for a test: on timeout it fails t, saying what did not happen and the
// node's last state.
func MustWaitNode(t testing.TB, c kubernetes.Interface, name string, timeout time.Duration, what string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	n, err := WaitNode(context.Background(), c, name, timeout, cond)
	if err != nil {
		t.Fatalf("node %s: %s did not happen: %v", name, what, err)
	}
	return n
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
