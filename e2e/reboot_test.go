package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

const rebootLimit = 8 * time.Minute // one TCG reboot takes ~1 min; several queue behind a budget of 1

func nodeNames(t *testing.T, ctx context.Context, c kubernetes.Interface) []string {
	t.Helper()
	l, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range l.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		t.Fatal("no nodes")
	}
	return names
}

// readyWatcher tracks the smallest number of Ready pods of a workload seen at any instant.
type readyWatcher struct {
	mu    sync.Mutex
	ready map[string]bool
	min   int
	stop  context.CancelFunc
}

func watchReady(t *testing.T, c kubernetes.Interface, selector string) *readyWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &readyWatcher{ready: map[string]bool{}, min: 1 << 30, stop: cancel}
	wi, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range wi.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			r := false
			if ev.Type != watch.Deleted && p.DeletionTimestamp == nil {
				for _, cond := range p.Status.Conditions {
					if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
						r = true
					}
				}
			}
			w.mu.Lock()
			w.ready[p.Name] = r
			n := 0
			for _, v := range w.ready {
				if v {
					n++
				}
			}
			if n < w.min {
				w.min = n
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// A locksmithctl-style signal inside a VM: the node is cordoned, a workload with a PDB is evicted
// within its budget, the VM really reboots (boot ID and on-disk boot counter change), the node returns
// Ready, is uncordoned, and the annotations end in FLUO's final state.
func TestRebootOneNodeWithPDB(t *testing.T) {
	f := features.New("one node, PDB-protected workload").
		Assess("signal, drain within the PDB, real reboot, back in service", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			skipIfNeeded(t)
			c := clientset(t, cfg)
			target := nodeNames(t, ctx, c)[0]
			labels := map[string]string{"app": "web"}
			replicas := int32(2)
			dep := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
				Spec: appsv1.DeploymentSpec{
					Replicas: &replicas,
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{
							// Start on the node that will reboot, so the drain has something to evict.
							Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
								Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{target}}}},
							}}}},
							Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10", ImagePullPolicy: corev1.PullIfNotPresent}},
						},
					},
				},
			}
			if _, err := c.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			one := intstr.FromInt32(1)
			pdb := &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
				Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
			}
			if _, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitPods(t, ctx, c, "app=web", 2, target)
			rw := watchReady(t, c, "app=web")
			defer rw.stop()
			s := before(t, ctx, c, target)
			fireLocksmith(t, ctx, c, target)
			waitRebooted(t, ctx, c, s, rebootLimit)
			rw.mu.Lock()
			minReady := rw.min
			rw.mu.Unlock()
			if minReady < 1 {
				t.Errorf("the PDB (maxUnavailable 1 of 2) was broken: %d web pods Ready at one point", minReady)
			}
			pods, _ := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "spec.nodeName=" + target})
			t.Logf("web pods on %s after its reboot: %d (evicted before it, at least 1 of 2 Ready throughout: min %d)", target, len(pods.Items), minReady)
			_ = c.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{})
			_ = c.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "web", metav1.DeleteOptions{})
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}

// waitPods waits for n Running+Ready pods, at least one of them on node (the drain must have work).
func waitPods(t *testing.T, ctx context.Context, c kubernetes.Interface, selector string, n int, node string) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		ready, onNode := 0, 0
		if err == nil {
			for _, p := range l.Items {
				for _, cond := range p.Status.Conditions {
					if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
						ready++
						if p.Spec.NodeName == node {
							onNode++
						}
					}
				}
			}
		}
		if ready >= n && onNode > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods %s: %d Ready (%d on %s) after 4m", selector, ready, onNode, node)
		}
		time.Sleep(2 * time.Second)
	}
}

// All nodes ask at once under budget 1 (one through update_engine's own AttemptUpdate path, the others
// locksmithctl-style) with a before-reboot hook, and the operator is SIGKILLed while the first node
// waits for its hook; a watch on every Node change sees at most one unavailable at any instant. One
// scenario, one real reboot per node, proves what took three scenarios and six reboots before:
// strictly sequential reboots (never two nodes unavailable, each reboot-ok after the previous node was
// back), the hook holding every node until it answers, and a new operator process finishing the cycle
// from the Nodes alone with the budget intact.
func TestAllNodesAtOnceOneByOne(t *testing.T) {
	const hook = "e2e.slipway.dev/hook-ok"
	const delay = 15 * time.Second
	f := features.New("all nodes at once, budget 1, a before-reboot hook, the operator killed mid-cycle").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			skipIfNeeded(t)
			if cluster == nil {
				return ctx // an external cluster: its operator as deployed, no hook, no kill
			}
			cluster.KillOperator()
			if err := cluster.StartOperator("--before-reboot-annotations=" + hook); err != nil {
				t.Fatal(err)
			}
			hookDaemonSet(t, ctx, clientset(t, cfg), hook, delay)
			return ctx
		}).
		Assess("strictly sequential real reboots, each held by the hook, across an operator kill", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			skipIfNeeded(t)
			c := clientset(t, cfg)
			names := nodeNames(t, ctx, c)
			var states []nodeState
			for _, n := range names {
				states = append(states, before(t, ctx, c, n))
			}
			// The kill waits, from before the first signal, for the first node to be held in
			// before-reboot; so it does not depend on how long the signals take to send.
			type kill struct {
				node string
				err  error
			}
			killed := make(chan kill, 1)
			if cluster != nil {
				go func() {
					n, err := killWhileHeld(ctx, c, names, hook)
					killed <- kill{n, err}
				}()
			}
			for i, n := range names {
				// On a real Flatcar image AttemptUpdate asks the real update server, which an
				// offline VM cannot reach: there every node gets the locksmithctl signal.
				if i == 1 && cluster != nil && cluster.FlatcarImage == "" {
					fireAttemptUpdate(t, ctx, n)
				} else {
					fireLocksmith(t, ctx, c, n)
				}
			}
			if cluster != nil {
				k := <-killed
				if k.err != nil {
					t.Fatal(k.err)
				}
				t.Logf("operator killed while %s waited in before-reboot, a new one started 5 s later", k.node)
			}
			for _, s := range states {
				waitRebooted(t, ctx, c, s, time.Duration(len(names))*rebootLimit)
			}
			if p := timeline.PeakUnavailable(); p > 1 {
				t.Errorf("more than one node unavailable at one instant (peak %d) with --max-unavailable=1", p)
			}
			// Sequential: each reboot-ok came after the previous node was back in service; and the
			// hook held each node at least its delay between the before-reboot label and the cordon.
			type span struct{ ok, done time.Time }
			var spans []span
			for _, n := range names {
				cs := timeline.Cycles(n)
				if len(cs) == 0 {
					t.Fatalf("%s: no cycle recorded", n)
				}
				last := cs[len(cs)-1]
				spans = append(spans, span{last["reboot-ok"], last["uncordoned"]})
				if cluster != nil {
					labelled, cordoned := last["hooks"], last["cordon"]
					if labelled.IsZero() || cordoned.IsZero() {
						t.Errorf("%s: no before-reboot label or no cordon recorded: %v", n, last)
					} else if held := cordoned.Sub(labelled); held < delay-5*time.Second {
						t.Errorf("%s: drain started %s after the before-reboot label; the hook holds for %s", n, held, delay)
					}
				}
			}
			sort.Slice(spans, func(i, j int) bool { return spans[i].ok.Before(spans[j].ok) })
			for i := 1; i < len(spans); i++ {
				if spans[i].ok.Before(spans[i-1].done) {
					t.Errorf("reboot %d was granted before reboot %d finished", i+1, i)
				}
			}
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}

// killWhileHeld SIGKILLs the operator once a node waits in before-reboot for the hook, leaves the
// cluster without an operator for 5 s, and starts a new one.
// It runs beside the signals and so never touches t; it returns the node it found.
func killWhileHeld(ctx context.Context, c kubernetes.Interface, names []string, hook string) (string, error) {
	var first string
	for deadline := time.Now().Add(3 * time.Minute); first == ""; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no node entered before-reboot within 3m")
		}
		for _, n := range names {
			if node, err := c.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); err == nil && node.Labels[protocol.BeforeReboot] == protocol.True {
				first = n
			}
		}
	}
	cluster.KillOperator()
	time.Sleep(5 * time.Second) // a gap with no operator at all
	return first, cluster.StartOperator("--before-reboot-annotations=" + hook)
}

// hookDaemonSet is a before-reboot hook as FLUO documents them: a DaemonSet selecting the
// before-reboot=true label, whose pod sets its annotation to "true" after a delay.
func hookDaemonSet(t *testing.T, ctx context.Context, c kubernetes.Interface, annotation string, delay time.Duration) {
	t.Helper()
	labels := map[string]string{"app": "before-reboot-hook"}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns}}
	_, _ = c.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
	_, _ = c.RbacV1().ClusterRoles().Create(ctx, hookRole(), metav1.CreateOptions{})
	_, _ = c.RbacV1().ClusterRoleBindings().Create(ctx, hookBinding(), metav1.CreateOptions{})
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "before-reboot-hook", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: "hook",
					NodeSelector:       map[string]string{protocol.BeforeReboot: protocol.True},
					Containers: []corev1.Container{{
						Name: "hook", Image: hookImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Env: []corev1.EnvVar{
							{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
							{Name: "HOOK_ANNOTATION", Value: annotation},
							{Name: "HOOK_DELAY", Value: delay.String()},
							{Name: "KUBERNETES_SERVICE_HOST", Value: "10.0.2.2"},
							{Name: "KUBERNETES_SERVICE_PORT", Value: apiPort()},
						},
					}},
				},
			},
		},
	}
	if cluster == nil {
		ds.Spec.Template.Spec.Containers[0].Env = ds.Spec.Template.Spec.Containers[0].Env[:3]
	}
	if _, err := c.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitFor(ctx context.Context, c kubernetes.Interface, node string, timeout time.Duration, cond func(*corev1.Node) bool) (time.Time, error) {
	if _, err := testenv.WaitNode(ctx, c, node, timeout, cond); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}
