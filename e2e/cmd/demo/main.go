// Command demo is `make demo`: it starts a real control plane on loopback (etcd, kube-apiserver,
// kube-controller-manager), a handful of simulated Flatcar nodes (each with its own dbus-daemon, the
// update_engine and logind stand-ins, and the real update-agent), a workload with a
// PodDisruptionBudget, and the update-operator with a canary and a settle time. It fires an update on
// every node at once, prints the rolling reboot as it happens (the canary going alone, the others
// waiting for its bake, finished nodes settling), and exits 0 when every node has rebooted exactly
// once onto the new version and is back in service, the canary's bake held.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/budget"
	"github.com/slipway-dev/slipway/operator/status"
	sigsyaml "sigs.k8s.io/yaml"
)

func main() {
	n := flag.Int("nodes", 5, "simulated nodes")
	maxUnavail := flag.String("max-unavailable", "2", "the operator's --max-unavailable")
	timeout := flag.Duration("timeout", 3*time.Minute, "give up after this long")
	keep := flag.Bool("keep", false, "keep the scratch directory (logs of etcd, apiserver, dbus)")
	flag.BoolVar(&stay, "stay", false, "after the roll-out, keep the cluster, the nodes and the operator running until Ctrl-C, and say how to point kubectl slipway (and kubectl) at them")
	flag.IntVar(&canary.Nodes, "canary-nodes", 1, "the operator's --canary-nodes: the first N nodes asking for the new version go alone")
	flag.DurationVar(&canary.Bake, "canary-bake", 3*time.Second, "the operator's --canary-bake")
	flag.DurationVar(&settle.Time, "settle-time", 2*time.Second, "the operator's --settle-time (and --settle-pdbs is on)")
	flag.Parse()
	if err := run(*n, *maxUnavail, *timeout, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

var (
	stay   bool
	start  = time.Now()
	canary admission.Canary
	settle = operator.SettleConfig{PDBs: true, Timeout: time.Minute}
)

func say(format string, args ...interface{}) {
	fmt.Printf("[%6.2fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

func run(count int, maxUnavail string, timeout time.Duration, keep bool) error {
	max, err := budget.ParseMax(maxUnavail)
	if err != nil {
		return err
	}
	interrupted, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(interrupted, timeout)
	defer cancelTimeout()
	// life: what runs the cluster (control plane, nodes, the kubelet and ReplicaSet stand-ins). The
	// timeout bounds the roll-out; with -stay the cluster lives on until Ctrl-C.
	life := ctx
	if stay {
		life = interrupted
	}

	dir, err := os.MkdirTemp("", "slipway-demo-")
	if err != nil {
		return err
	}
	if keep {
		say("scratch directory (kept): %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	// The components' structured logs go to a file; the terminal gets the timeline.
	logPath := filepath.Join(dir, "slipway.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	testenv.KlogTo(logFile)
	if keep {
		say("agent and operator logs: %s", logPath)
	}

	say("starting etcd, kube-apiserver, kube-controller-manager (binaries from hack/build-controlplane.sh)")
	cp, err := testenv.StartControlPlane(life, filepath.Join(dir, "cp"), testenv.Options{ControllerManager: true, Log: say})
	if err != nil {
		return err
	}
	defer cp.Stop()
	client := cp.Client()
	testenv.PodKubelet(life, client)

	say("starting %d simulated Flatcar nodes: dbus-daemon + update_engine/logind stand-ins + update-agent each", count)
	var nodes []*simnode.Node
	for i := 0; i < count; i++ {
		sn, err := simnode.New(life, fmt.Sprintf("flatcar-%d", i), simnode.Options{
			Client: client, Dir: filepath.Join(dir, fmt.Sprintf("node-%d", i)), Log: klog.Background(), RebootDelay: 2 * time.Second,
		})
		if err != nil {
			return err
		}
		defer sn.Stop()
		nodes = append(nodes, sn)
	}
	if err := workload(ctx, client, count); err != nil {
		return err
	}
	go replicaSet(life, client, count)
	dyn, err := pools(ctx, cp, client, nodes)
	if err != nil {
		return err
	}

	// The real update-operator binary, as deploy/ runs it (its args, --start-paused among them), with
	// the demo's policy after them (a flag given again wins).
	say("building update-operator from this tree (go build: ~1 min the first time, then from Go's cache)")
	bin, err := operatorproc.Build(ctx, filepath.Join(dir, "bin"), "")
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	args, err := deployArgs()
	if err != nil {
		return err
	}
	port, err := testenv.FreePort()
	if err != nil {
		return err
	}
	args = append(args, "--kubeconfig="+cp.Kubeconfig, "--namespace="+ns, "--identity=demo-operator", fmt.Sprintf("--http-address=127.0.0.1:%d", port),
		"--max-unavailable="+maxUnavail, fmt.Sprintf("--canary-nodes=%d", canary.Nodes), "--canary-bake="+canary.Bake.String(),
		"--settle-time="+settle.Time.String(), "--drain-timeout=1m", "--drain-retry-base=1s", "--drain-retry-max=5s")
	op, err := operatorproc.Start(bin.Path, args, logPath)
	if err != nil {
		return err
	}
	defer op.Stop(10 * time.Second)
	say("update-operator running (%s): %s", filepath.Base(bin.Path), strings.Join(args, " "))
	say("a fresh install starts paused (--start-paused, as deploy/ ships it); a PDB keeps at least %d of %d web pods up", count-1, count)
	kubectlSlipway := func(more ...string) {
		fmt.Println()
		fmt.Printf("$ kubectl slipway %s\n", strings.Join(more, " "))
		status.Main("kubectl slipway", append(more, "--kubeconfig", cp.Kubeconfig, "-n", ns), os.Stdout, os.Stderr)
		fmt.Println()
	}

	tl := newTimeline(nodes)
	go tl.watch(life, client)
	time.Sleep(500 * time.Millisecond)
	say("firing an update to %s on every node at once (update_engine stand-in: CHECKING → … → UPDATED_NEED_REBOOT)", nodes[0].UE.NewVersion)
	for _, sn := range nodes {
		go sn.UE.AttemptUpdate()
	}
	if err := heldByThePause(ctx, client, nodes); err != nil {
		return err
	}
	kubectlSlipway("status")
	kubectlSlipway("resume")
	select {
	case <-tl.done:
	case <-ctx.Done():
		return fmt.Errorf("not every node finished within %s (%v)", timeout, ctx.Err())
	}
	tl.summary(max.Limit(count))
	for _, sn := range nodes {
		if sn.Boots() != 1 {
			return fmt.Errorf("%s rebooted %d times, want 1", sn.Name, sn.Boots())
		}
	}
	if p := tl.unav.Max(); p > max.Limit(count) {
		return fmt.Errorf("budget exceeded: %d nodes unavailable at once", p)
	}
	for _, sn := range nodes {
		if sn.Version() != sn.UE.NewVersion {
			return fmt.Errorf("%s runs %s, want %s", sn.Name, sn.Version(), sn.UE.NewVersion)
		}
	}
	if err := tl.canaries(canary); err != nil {
		return err
	}
	if err := poolStatus(ctx, dyn, count); err != nil {
		return err
	}
	kubectlSlipway("status")
	// The operator writes what waits of the history as it stops (SIGTERM, as Kubernetes stops it).
	op.Stop(10 * time.Second)
	kubectlSlipway("history")
	svg := filepath.Join(os.TempDir(), "slipway-demo-rollout.svg")
	kubectlSlipway("history", "--svg", svg)
	say("done: every node rebooted exactly once, never more than %d unavailable at once; the roll-out's timeline: %s", tl.unav.Max(), svg)
	if !stay {
		say("all of it is stopped now; make demo DEMO_FLAGS=-stay keeps it running to look around")
		return nil
	}
	// The operator again (it stopped to write its history), and how to reach all of it.
	op, err = operatorproc.Start(bin.Path, args, logPath)
	if err != nil {
		return err
	}
	defer op.Stop(10 * time.Second)
	plugin := filepath.Join(dir, "bin", "kubectl-slipway")
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	if err := testenv.GoBuild(life, root, "-o", plugin, "./operator/cmd/kubectl-slipway"); err != nil {
		return err
	}
	fmt.Printf("\nThe cluster, its %d nodes and the operator keep running until Ctrl-C. In another terminal:\n\n"+
		"  export KUBECONFIG=%s PATH=%s:$PATH\n"+
		"  kubectl-slipway status -n %s       # or kubectl slipway status -n %s, with kubectl installed\n"+
		"  kubectl-slipway history -n %s\n"+
		"  kubectl get nodes,rebootpolicies     # with kubectl installed\n"+
		"  kubectl annotate node flatcar-0 --overwrite %s=true   # another cycle, by hand\n\n",
		count, cp.Kubeconfig, filepath.Dir(plugin), ns, ns, ns, protocol.RebootNeeded)
	<-interrupted.Done()
	say("Ctrl-C: stopping the operator, the nodes and the control plane")
	return nil
}

// ns is the operator's namespace, as deploy/ installs it.
const ns = "slipway-system"

// deployArgs are the update-operator's args in deploy/base/operator.yaml.
func deployArgs() ([]string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "base", "operator.yaml"))
	if err != nil {
		return nil, err
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var d appsv1.Deployment
		if err := sigsyaml.Unmarshal([]byte(doc), &d); err == nil && d.Kind == "Deployment" && len(d.Spec.Template.Spec.Containers) > 0 {
			return d.Spec.Template.Spec.Containers[0].Args, nil
		}
	}
	return nil, fmt.Errorf("deploy/base/operator.yaml has no Deployment")
}

// heldByThePause waits (bounded) until every node asks to reboot and is held by the fleet's pause.
func heldByThePause(ctx context.Context, client kubernetes.Interface, nodes []*simnode.Node) error {
	deadline := time.Now().Add(time.Minute)
	for {
		held := 0
		for _, sn := range nodes {
			n, err := client.CoreV1().Nodes().Get(ctx, sn.Name, metav1.GetOptions{})
			if err == nil && strings.HasPrefix(n.Annotations[protocol.BlockedBy], "paused:") {
				held++
			}
		}
		if held == len(nodes) {
			say("every node asks to reboot and waits: the fleet is paused")
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("only %d of %d nodes held by the pause after a minute: is the operator running? (its log: --keep)", held, len(nodes))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pools puts the nodes in two pools: the first ones in "web" (two at a time), the last two in "db"
// (one at a time, each settling 3 s longer), as RebootPolicies over the CRD the installs ship.
func pools(ctx context.Context, cp *testenv.ControlPlane, c kubernetes.Interface, nodes []*simnode.Node) (dynamic.Interface, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := testenv.InstallCRDs(ctx, cp.RestConfig(), filepath.Join(root, "deploy/base/crd")); err != nil {
		return nil, err
	}
	dyn := dynamic.NewForConfigOrDie(cp.RestConfig())
	var web, db []string
	for i, sn := range nodes {
		pool := "web"
		if i >= len(nodes)-2 {
			pool = "db"
			db = append(db, sn.Name)
		} else {
			web = append(web, sn.Name)
		}
		if _, err := c.CoreV1().Nodes().Patch(ctx, sn.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"demo.slipway.dev/pool":"`+pool+`"}}}`), metav1.PatchOptions{}); err != nil {
			return nil, err
		}
	}
	for _, rp := range []map[string]interface{}{
		{"name": "web", "spec": map[string]interface{}{"nodeSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"demo.slipway.dev/pool": "web"}}, "maxUnavailable": 2}},
		{"name": "db", "spec": map[string]interface{}{"nodeSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"demo.slipway.dev/pool": "db"}}, "maxUnavailable": 1,
			"settle": map[string]interface{}{"time": "3s"}}},
	} {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "RebootPolicy",
			"metadata": map[string]interface{}{"name": rp["name"]}, "spec": rp["spec"]}}
		if _, err := dyn.Resource(v1alpha1.Resource).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	say("RebootPolicies: web (%s; 2 at a time), db (%s; 1 at a time, settle 3s); the fleet's budget caps both", strings.Join(web, ", "), strings.Join(db, ", "))
	return dyn, nil
}

// poolStatus says each RebootPolicy's status as the operator wrote it (kubectl get rp), and fails when a
// pool does not show every one of its nodes up to date.
func poolStatus(ctx context.Context, dyn dynamic.Interface, count int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := dyn.Resource(v1alpha1.Resource).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		total, lines := int64(0), []string{}
		for _, u := range l.Items {
			nodes, _, _ := unstructured.NestedInt64(u.Object, "status", "nodes")
			up, _, _ := unstructured.NestedInt64(u.Object, "status", "upToDate")
			window, _, _ := unstructured.NestedString(u.Object, "status", "window")
			if up == nodes {
				total += up
			}
			lines = append(lines, fmt.Sprintf("%s: %d node(s), %d up to date, window %s", u.GetName(), nodes, up, window))
		}
		if total == int64(count) {
			say("kubectl get rp: %s", strings.Join(lines, "; "))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the RebootPolicies' status never showed every node up to date: %s", strings.Join(lines, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// workload: one web pod per node, owned by a ReplicaSet, with a PDB allowing one disruption.
func workload(ctx context.Context, c kubernetes.Interface, count int) error {
	ns := "demo"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	labels := map[string]string{"app": "web"}
	r := int32(count)
	rs, err := c.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &r, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.invalid/web:1"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	yes := true
	for i := 0; i < count; i++ {
		_, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes}}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("flatcar-%d", i), Containers: []corev1.Container{{Name: "web", Image: "example.invalid/web:1"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
	}
	min := intstr.FromInt32(int32(count - 1))
	_, err = c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &min, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	return testenv.WaitPodsRunning(ctx, c, ns, "app=web", count)
}

// timeline prints every node's state changes as a watch delivers them.
type timeline struct {
	mu     sync.Mutex
	nodes  map[string]*simnode.Node
	state  map[string]string
	unav   testenv.Peak
	first  map[string]time.Time
	cycle  map[string]time.Time // when its cycle started (first seen in it)
	end    map[string]time.Time
	done   chan struct{}
	closed bool
}

func newTimeline(nodes []*simnode.Node) *timeline {
	t := &timeline{nodes: map[string]*simnode.Node{}, state: map[string]string{},
		first: map[string]time.Time{}, cycle: map[string]time.Time{}, end: map[string]time.Time{}, done: make(chan struct{})}
	for _, n := range nodes {
		t.nodes[n.Name] = n
	}
	return t
}

func (t *timeline) watch(ctx context.Context, c kubernetes.Interface) {
	w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		say("watch failed: %v", err)
		return
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			continue
		}
		if n, ok := ev.Object.(*corev1.Node); ok {
			t.observe(n)
		}
	}
}

func describe(n *corev1.Node, s protocol.State) string {
	a := n.Annotations
	switch s {
	case protocol.Idle:
		if a[protocol.LastRebootTime] != "" {
			if n.Spec.Unschedulable {
				return "done (still cordoned)"
			}
			return "done on " + n.Labels[protocol.Version] + ": uncordoned, reboot-ok=false"
		}
		return "idle"
	case protocol.NeedsReboot:
		if b := a[protocol.BlockedBy]; b != "" {
			return "waiting: " + b
		}
		return "reboot-needed=true"
	case protocol.Draining:
		return "cordoned, draining"
	case protocol.Rebooting:
		if a[protocol.RebootInProgress] == protocol.True {
			return "agent rebooting through logind"
		}
		return "drained, reboot-ok=true"
	case protocol.Rebooted:
		return "back with boot ID " + a[protocol.BootID]
	}
	return string(s)
}

func (t *timeline) observe(n *corev1.Node) {
	if _, ok := t.nodes[n.Name]; !ok {
		return
	}
	f := protocol.Observe(n, protocol.Hooks{})
	s := protocol.Classify(f)
	d := describe(n, s)
	busy := t.unav.Set(n.Name, f.Unavailable())
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state[n.Name] == d {
		return
	}
	if _, seen := t.state[n.Name]; !seen && d == "idle" {
		t.state[n.Name] = d
		return
	}
	t.state[n.Name] = d
	if _, ok := t.first[n.Name]; !ok && s != protocol.Idle {
		t.first[n.Name] = time.Now()
	}
	if _, ok := t.cycle[n.Name]; !ok && s.InCycle() {
		t.cycle[n.Name] = time.Now()
	}
	say("%-10s %-42s (unavailable now: %d)", n.Name, d, busy)
	if strings.HasPrefix(d, "done") {
		t.end[n.Name] = time.Now()
		if len(t.end) == len(t.nodes) && !t.closed {
			t.closed = true
			close(t.done)
		}
	}
}

func (t *timeline) summary(limit int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make([]string, 0, len(t.nodes))
	for name := range t.nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Println()
	fmt.Printf("%-10s %10s %10s %8s\n", "node", "asked", "done", "cycle")
	for _, name := range names {
		a, e := t.first[name], t.end[name]
		fmt.Printf("%-10s %9.2fs %9.2fs %7.2fs\n", name, a.Sub(start).Seconds(), e.Sub(start).Seconds(), e.Sub(a).Seconds())
	}
	fmt.Printf("peak unavailable: %d (budget %d)\n\n", t.unav.Max(), limit)
}

// canaries checks what the timeline saw against --canary-nodes and --canary-bake: the first
// c.Nodes cycles ran before any other started, and the others started the bake after the last of
// them finished (less a second: the operator counts from its whole-second last-reboot-time).
func (t *timeline) canaries(c admission.Canary) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.Nodes <= 0 {
		return nil
	}
	names := make([]string, 0, len(t.cycle))
	for name := range t.cycle {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return t.cycle[names[i]].Before(t.cycle[names[j]]) })
	if len(names) <= c.Nodes {
		return nil
	}
	var proven time.Time
	for _, name := range names[:c.Nodes] {
		if e := t.end[name]; e.After(proven) {
			proven = e
		}
	}
	next := names[c.Nodes]
	gap := t.cycle[next].Sub(proven)
	// The bake counts from the finish the operator records (to the second, rounded up), which is a
	// moment before this watch sees it: a little slack for that moment, none for the second.
	if gap < c.Bake-250*time.Millisecond {
		return fmt.Errorf("canaries %v finished %.2fs before %s started, want at least the %s bake", names[:c.Nodes], gap.Seconds(), next, c.Bake)
	}
	say("canary: %s went first; the next cycle (%s) started %.2fs after it finished: the bake (--canary-bake=%s) held the others that long", strings.Join(names[:c.Nodes], ", "), next, gap.Seconds(), c.Bake)
	return nil
}

// replicaSet stands in for the ReplicaSet controller and the scheduler: whenever fewer than want web
// pods are alive, it starts a replacement on a schedulable node. That is what lets the PDB, which
// allows one web pod down at a time, make progress in a rolling fashion.
func replicaSet(ctx context.Context, c kubernetes.Interface, want int) {
	rs, err := c.AppsV1().ReplicaSets("demo").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return
	}
	yes := true
	for i := 0; ctx.Err() == nil; i++ {
		time.Sleep(200 * time.Millisecond)
		pods, err := c.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			continue
		}
		alive := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				alive++
			}
		}
		if alive >= want {
			continue
		}
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		var target string
		for _, n := range nodes.Items {
			if !n.Spec.Unschedulable && protocol.NodeReady(&n) {
				target = n.Name
				break
			}
		}
		if target == "" {
			continue
		}
		_, _ = c.CoreV1().Pods("demo").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-r%d", i), Labels: map[string]string{"app": "web"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes}}},
			Spec: corev1.PodSpec{NodeName: target, Containers: []corev1.Container{{Name: "web", Image: "example.invalid/web:1"}}},
		}, metav1.CreateOptions{})
	}
}
