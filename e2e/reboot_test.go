package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
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
			// Start on the node that will reboot, so the drain has something to evict.
			dep := pauseDeployment(ns, "web", labels, 2, target)
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

// The agent DaemonSet, as deployed from deploy/ (and installed by the harness).
const (
	agentNamespace = "slipway-system"
	agentDaemonSet = "slipway-update-agent"
	// restartedAtKey is the pod-template annotation `kubectl rollout restart` sets.
	restartedAtKey = "kubectl.kubernetes.io/restartedAt"
)

// What the agent logs (agent/agent.go) when it starts again within the boot it already reported, when
// it takes a grant and calls logind, and when it starts after a reboot and reports the node back.
const (
	agentLogSameBoot = "agent restarted within the same boot"
	agentLogReboot   = "rebooting through logind"
	agentLogNewBoot  = "first start in this boot"
)

// An upgrade of Slipway mid-cycle: the agent DaemonSet is rolled (as `kubectl rollout restart`
// does) while the operator holds a node in its drain, behind a PDB that allows no disruption. The
// old agent pod is gone and the new one Running on that node before the drain is let go; then the
// node reboots exactly once (one boot ID change, boot counter +1), its cycle finishes (reboot-ok,
// reboot-needed and reboot-in-progress false, uncordoned, Ready), reboot-ok was granted only after
// the old agent was gone, the new pod is the one left on the node (and, where there is a shell, its
// log shows it reported the node back, and took the grant where the kubelet kept its pre-reboot
// log), no other node rebooted or started a cycle, and the budget held.
func TestAgentRolledMidCycle(t *testing.T) {
	f := features.New("the agent DaemonSet rolled while a node is in its cycle").
		Assess("drain held, agent rolled, drain let go: one real reboot, finished by the new agent", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			skipIfNeeded(t)
			start := time.Now()
			logf := func(format string, args ...interface{}) {
				t.Helper()
				t.Logf("[+%5.1fs] "+format, append([]interface{}{time.Since(start).Seconds()}, args...)...)
			}
			c := clientset(t, cfg)
			names := nodeNames(t, ctx, c)
			target := names[0]

			// 1. A one-replica Deployment on the target under a PDB that allows no disruption: the
			// drain cannot finish until the PDB goes.
			labels := map[string]string{"app": "held-drain"}
			zero := intstr.FromInt32(0)
			// On the node that will reboot; once it is evicted, its replacement goes elsewhere.
			dep := pauseDeployment(ns, "held-drain", labels, 1, target)
			if _, err := c.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = c.AppsV1().Deployments(ns).Delete(context.Background(), "held-drain", metav1.DeleteOptions{})
			}()
			pdb := &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: "held-drain", Namespace: ns},
				Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels}},
			}
			if _, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// Deleted when the drain is let go; deferred too, so a failure never leaves the node held.
			defer func() {
				_ = c.PolicyV1().PodDisruptionBudgets(ns).Delete(context.Background(), "held-drain", metav1.DeleteOptions{})
			}()
			waitPods(t, ctx, c, "app=held-drain", 1, target)
			logf("held-drain pod Ready on %s under a PDB with maxUnavailable 0", target)

			// 2. The agent pod now on the target, and what every node looks like before.
			ds, err := c.AppsV1().DaemonSets(agentNamespace).Get(ctx, agentDaemonSet, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the agent DaemonSet %s/%s: %v", agentNamespace, agentDaemonSet, err)
			}
			agentSel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
			if err != nil {
				t.Fatalf("the agent DaemonSet's selector: %v", err)
			}
			agentPods := func(ctx context.Context) ([]corev1.Pod, error) {
				l, err := c.CoreV1().Pods(agentNamespace).List(ctx, metav1.ListOptions{LabelSelector: agentSel.String(), FieldSelector: "spec.nodeName=" + target})
				if err != nil {
					return nil, err
				}
				return l.Items, nil
			}
			pods, err := agentPods(ctx)
			if err != nil || len(pods) != 1 || !podReady(&pods[0]) {
				t.Fatalf("want one Ready agent pod on %s before the roll, got %d (%v): %s", target, len(pods), err, podSummary(pods))
			}
			oldPod := pods[0]
			logf("agent pod on %s before the roll: %s (uid %s)", target, oldPod.Name, oldPod.UID)
			states := map[string]nodeState{}
			cyclesBefore := map[string]int{}
			for _, n := range names {
				states[n] = before(t, ctx, c, n)
				cyclesBefore[n] = len(timeline.Cycles(n))
			}
			bw := watchBootIDs(t, c, target, states[target].bootID)
			defer bw.stop()

			// 3. Stage the update and wait for the operator to hold the node in its drain.
			// On a real Flatcar image AttemptUpdate asks the real update server, which an offline VM
			// cannot reach: there (and without a shell) the node gets the locksmithctl signal.
			if cluster != nil && cluster.FlatcarImage == "" {
				fireAttemptUpdate(t, ctx, target)
			} else {
				fireLocksmith(t, ctx, c, target)
			}
			logf("%s asked for a reboot; waiting for the operator to cordon and drain it", target)
			if _, err := testenv.WaitNode(ctx, c, target, 5*time.Minute, func(n *corev1.Node) bool {
				return n.Spec.Unschedulable && n.Annotations[protocol.DrainStarted] != "" && !protocol.IsTrue(n.Annotations, protocol.RebootOK)
			}); err != nil {
				t.Fatalf("%s was not cordoned and draining within 5m of its signal: %v", target, err)
			}
			logf("%s cordoned and draining, held by the PDB", target)

			// 4. Roll the agent DaemonSet exactly as `kubectl rollout restart` does, and wait for the
			// new pod to be the only agent pod on the target, Running and Ready.
			stamp := time.Now().UTC().Format(time.RFC3339Nano)
			patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, restartedAtKey, stamp)
			if _, err := c.AppsV1().DaemonSets(agentNamespace).Patch(ctx, agentDaemonSet, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatalf("rolling the agent DaemonSet: %v", err)
			}
			logf("agent DaemonSet rolled (%s=%s); waiting for the new agent pod on %s", restartedAtKey, stamp, target)
			var newPod corev1.Pod
			err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
				pods, err := agentPods(ctx)
				if err != nil || len(pods) != 1 {
					return false, nil // the old pod still terminating, or none yet
				}
				p := pods[0]
				if p.UID == oldPod.UID || p.DeletionTimestamp != nil || p.Annotations[restartedAtKey] != stamp || !podReady(&p) {
					return false, nil
				}
				if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != ds.UID {
					return false, fmt.Errorf("agent pod %s on %s is not controlled by the DaemonSet", p.Name, target)
				}
				newPod = p
				return true, nil
			})
			if err != nil {
				pods, _ := agentPods(ctx)
				t.Fatalf("the new agent pod was not Running and Ready on %s (the old one %s gone) within 5m: %v; agent pods there: %s", target, oldPod.Name, err, podSummary(pods))
			}
			logf("new agent pod %s (uid %s) Running on %s; %s is gone", newPod.Name, newPod.UID, target, oldPod.Name)

			// 5. Still held: no grant yet, so none can have gone to the old agent. Then let go.
			n, err := c.CoreV1().Nodes().Get(ctx, target, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !n.Spec.Unschedulable || protocol.IsTrue(n.Annotations, protocol.RebootOK) || protocol.IsTrue(n.Annotations, protocol.RebootInProgress) || n.Status.NodeInfo.BootID != states[target].bootID {
				t.Fatalf("%s left its held drain before it was let go: unschedulable %v, reboot-ok %q, reboot-in-progress %q, boot ID %s (was %s)",
					target, n.Spec.Unschedulable, n.Annotations[protocol.RebootOK], n.Annotations[protocol.RebootInProgress], n.Status.NodeInfo.BootID, states[target].bootID)
			}
			if pods, err := agentPods(ctx); err != nil || len(pods) != 1 || pods[0].UID != newPod.UID {
				t.Fatalf("at the release want only the new agent pod %s on %s, got (%v): %s", newPod.Name, target, err, podSummary(pods))
			}
			if e := n.Annotations[protocol.DrainError]; e != "" {
				logf("%s: a drain attempt ran out while held (retried, as --drain-failure-policy=retry says): %s", target, e)
			}
			// Taken before the delete is sent: an operator may grant before a slow Delete call returns.
			released := time.Now()
			if err := c.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "held-drain", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("deleting the PDB that holds the drain: %v", err)
			}
			logf("PDB deleted: the drain of %s may finish", target)

			// 6. One real reboot, the cycle finished.
			waitRebooted(t, ctx, c, states[target], rebootLimit)
			logf("%s rebooted and its cycle finished", target)

			// The timeline's watch may see the end a moment after waitRebooted's read.
			var last map[string]time.Time
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
				cs := timeline.Cycles(target)
				if len(cs) > cyclesBefore[target] {
					if last = cs[len(cs)-1]; !last["uncordoned"].IsZero() {
						if len(cs) != cyclesBefore[target]+1 {
							t.Errorf("%s: %d cycles recorded during the scenario, want 1", target, len(cs)-cyclesBefore[target])
						}
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: the timeline recorded no finished cycle 30s after waitRebooted (cycles: %v)", target, cs)
				}
			}
			for _, m := range []string{"cordon", "reboot-ok", "down", "up", "ready", "uncordoned"} {
				if last[m].IsZero() {
					t.Errorf("%s: milestone %s not recorded in its cycle: %v", target, m, last)
				}
			}
			if at := last["reboot-ok"]; !at.IsZero() && at.Before(released) {
				t.Errorf("%s: reboot-ok seen %s before the drain was let go", target, released.Sub(at))
			}
			if at := last["down"]; !at.IsZero() && at.Before(released) {
				t.Errorf("%s: reboot-in-progress seen %s before the drain was let go", target, released.Sub(at))
			}
			if ids := bw.seen(); len(ids) != 2 {
				t.Errorf("%s: boot IDs seen during the scenario %v, want exactly one change", target, ids)
			}

			// 7. The new agent pod is the one that took the grant and reported the node back.
			pods, err = agentPods(ctx)
			if err != nil || len(pods) != 1 || pods[0].UID != newPod.UID {
				t.Errorf("after the reboot want only the new agent pod %s (uid %s) on %s, got (%v): %s", newPod.Name, newPod.UID, target, err, podSummary(pods))
			}
			if cluster != nil {
				checkAgentLog(t, ctx, target, newPod)
			}

			// 8. Nobody else rebooted or entered a cycle; the budget held; the roll completed.
			for _, other := range names[1:] {
				o, err := c.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if o.Status.NodeInfo.BootID != states[other].bootID {
					t.Errorf("%s rebooted during the scenario (boot ID %s -> %s)", other, states[other].bootID, o.Status.NodeInfo.BootID)
				}
				if got := len(timeline.Cycles(other)); got != cyclesBefore[other] {
					t.Errorf("%s entered %d cycle(s) during the scenario; only %s asked", other, got-cyclesBefore[other], target)
				}
			}
			if p := timeline.PeakUnavailable(); p > 1 {
				t.Errorf("more than one node unavailable at one instant (peak %d) with --max-unavailable=1", p)
			}
			err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
				d, err := c.AppsV1().DaemonSets(agentNamespace).Get(ctx, agentDaemonSet, metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				s := d.Status
				ds = d
				return s.ObservedGeneration >= d.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberAvailable == s.DesiredNumberScheduled, nil
			})
			if err != nil {
				t.Errorf("the agent DaemonSet did not finish rolling within 5m: %+v", ds.Status)
			}
			logf("agent DaemonSet rolled on all %d nodes; peak unavailable %d", ds.Status.DesiredNumberScheduled, timeline.PeakUnavailable())
			return ctx
		}).Feature()
	testEnv.Test(t, f)
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podSummary(pods []corev1.Pod) string {
	var parts []string
	for _, p := range pods {
		s := fmt.Sprintf("%s uid=%s phase=%s ready=%v", p.Name, p.UID, p.Status.Phase, podReady(&p))
		if p.DeletionTimestamp != nil {
			s += " terminating"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// checkAgentLog reads, inside the VM, the container logs of the agent pod that must have finished the
// cycle: the kubelet keeps them under /var/log/pods across the reboot, one file per container start.
func checkAgentLog(t *testing.T, ctx context.Context, node string, p corev1.Pod) {
	t.Helper()
	dir := fmt.Sprintf("/var/log/pods/%s_%s_%s/update-agent", p.Namespace, p.Name, p.UID)
	vm := cluster.VM(node)
	files, err := vm.Exec(ctx, "/bin/sh", "-c", "ls "+dir)
	if err != nil {
		t.Errorf("%s: listing the new agent pod's logs in %s: %v %s", node, dir, err, files)
		return
	}
	logs, err := vm.Exec(ctx, "/bin/sh", "-c", "cat "+dir+"/*.log")
	if err != nil {
		t.Errorf("%s: reading the new agent pod's logs in %s: %v", node, dir, err)
		return
	}
	if !strings.Contains(logs, agentLogNewBoot) {
		t.Errorf("%s: the new agent pod %s never logged %q: it did not report the node back after the reboot", node, p.Name, agentLogNewBoot)
	}
	if len(strings.Fields(files)) < 2 {
		// The kubelet may have removed the log of the container that ran before the reboot.
		t.Logf("%s: only %q in %s: the pre-reboot container's log is gone, so who called logind is proven by the API alone", node, strings.TrimSpace(files), dir)
		return
	}
	if !strings.Contains(logs, agentLogSameBoot) {
		t.Errorf("%s: the new agent pod %s never logged %q: it did not start within the held cycle's boot", node, p.Name, agentLogSameBoot)
	}
	if n := strings.Count(logs, agentLogReboot); n < 1 {
		t.Errorf("%s: the new agent pod %s never logged %q: it did not take the grant", node, p.Name, agentLogReboot)
	} else {
		t.Logf("%s: the new agent pod %s logged %q %d time(s), %q and %q", node, p.Name, agentLogReboot, n, agentLogSameBoot, agentLogNewBoot)
	}
}

// bootIDWatcher records every boot ID a Node reports, in order, from a watch (re-established
// from the last resourceVersion if the API server ends it).
type bootIDWatcher struct {
	mu   sync.Mutex
	ids  []string
	stop context.CancelFunc
}

func watchBootIDs(t *testing.T, c kubernetes.Interface, node, initial string) *bootIDWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &bootIDWatcher{ids: []string{initial}, stop: cancel}
	n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w.record(n.Status.NodeInfo.BootID)
	go func() {
		rv := n.ResourceVersion
		for ctx.Err() == nil {
			wi, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node, ResourceVersion: rv})
			if err != nil {
				time.Sleep(time.Second)
				continue
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					rv = "" // e.g. 410 Gone: start again from the Node as it is now
					continue
				}
				if n, ok := ev.Object.(*corev1.Node); ok {
					rv = n.ResourceVersion
					w.record(n.Status.NodeInfo.BootID)
				}
			}
			time.Sleep(time.Second)
		}
	}()
	return w
}

func (w *bootIDWatcher) record(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id != "" && id != w.ids[len(w.ids)-1] {
		w.ids = append(w.ids, id)
	}
}

func (w *bootIDWatcher) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.ids...)
}

// pauseDeployment is a Deployment of replicas pause pods that prefer to start on node (so that its
// drain has something to evict; replacements go wherever they fit).
func pauseDeployment(ns, name string, labels map[string]string, replicas int32, node string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
						Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}},
					}}}},
					Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10", ImagePullPolicy: corev1.PullIfNotPresent}},
				},
			},
		},
	}
}
