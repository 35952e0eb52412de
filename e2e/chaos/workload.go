package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// Namespace holds the chaos workloads (and is what the checker watches for pods and PDBs).
const Namespace = "chaos"

// app is one workload: a ReplicaSet object (no controller runs; the pods are owned by it so drains
// evict them as managed pods) and a PDB with an integer minAvailable. replicas is what the stand-in
// ReplicaSet controller keeps alive; raising it is how a blocking PDB is relaxed.
type app struct {
	name         string
	minAvailable int
	replicas     atomic.Int32
	owner        metav1.OwnerReference
}

// createApp creates the ReplicaSet object, one pod on each of nodes, and the PDB, and waits for the
// pods to run.
func createApp(ctx context.Context, c kubernetes.Interface, name string, nodes []string, minAvailable int) (*app, error) {
	labels := map[string]string{"app": name}
	r := int32(len(nodes))
	rs, err := c.AppsV1().ReplicaSets(Namespace).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{Replicas: &r, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/" + name + ":1"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	yes := true
	a := &app{name: name, minAvailable: minAvailable,
		owner: metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes}}
	a.replicas.Store(r)
	for i, n := range nodes {
		if err := a.createPod(ctx, c, fmt.Sprintf("%s-%d", name, i), n); err != nil {
			return nil, err
		}
	}
	min := intstr.FromInt32(int32(minAvailable))
	if _, err := c.PolicyV1().PodDisruptionBudgets(Namespace).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &min, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	return a, testenv.WaitPodsRunning(ctx, c, Namespace, "app="+name, len(nodes))
}

func (a *app) createPod(ctx context.Context, c kubernetes.Interface, name, node string) error {
	_, err := c.CoreV1().Pods(Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": a.name}, OwnerReferences: []metav1.OwnerReference{a.owner}},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/" + a.name + ":1"}}},
	}, metav1.CreateOptions{})
	return err
}

// replicaSets stands in for the ReplicaSet controller and the scheduler: whenever an app has fewer
// live pods than it wants, it starts replacements on nodes that are schedulable, Ready and not about
// to reboot. Without it every drain would eat into the PDBs for good.
func replicaSets(ctx context.Context, c kubernetes.Interface, apps []*app, rng *rand.Rand) {
	seq := 0
	for ctx.Err() == nil {
		if testenv.WaitCtx(ctx, 250*time.Millisecond) != nil {
			return
		}
		pods, err := c.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		alive := map[string]int{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				alive[p.Labels["app"]]++
			}
		}
		var nodes *corev1.NodeList
		for _, a := range apps {
			missing := int(a.replicas.Load()) - alive[a.name]
			if missing <= 0 {
				continue
			}
			if nodes == nil {
				if nodes, err = c.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
					break
				}
			}
			var good, ok []string
			for i := range nodes.Items {
				n := &nodes.Items[i]
				if n.Spec.Unschedulable || !protocol.NodeReady(n) || n.Annotations[protocol.RebootOK] == protocol.True {
					continue
				}
				ok = append(ok, n.Name)
				if n.Annotations[protocol.RebootNeeded] != protocol.True {
					good = append(good, n.Name)
				}
			}
			if len(good) == 0 {
				good = ok
			}
			for i := 0; i < missing && len(good) > 0; i++ {
				seq++
				_ = a.createPod(ctx, c, fmt.Sprintf("%s-r%d", a.name, seq), good[rng.IntN(len(good))])
			}
		}
	}
}

// leaseHolder is the identity holding the operator's leader Lease ("" if none or unreadable).
func leaseHolder(ctx context.Context, c kubernetes.Interface, ns, name string) string {
	l, err := c.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// ensureNamespace creates ns if it does not exist.
func ensureNamespace(ctx context.Context, c kubernetes.Interface, ns string) error {
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
