package operator_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/referee"
	"github.com/slipway-dev/slipway/internal/testsupport/simnode"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/fence"
	"github.com/slipway-dev/slipway/operator/policy"
	"github.com/slipway-dev/slipway/operator/stall"
)

// One real control plane (etcd, kube-apiserver, kube-controller-manager) for the whole package,
// started by the first test that calls needCluster (a run of only the unit tests, like `make unit`'s
// -short, starts nothing), and the update-operator binary, built by the first test that calls
// needOperatorBinary. TestMain stops what was started.
var (
	shared = &testenv.Shared{Name: "operator", Options: testenv.Options{ControllerManager: true}}
	cp     *testenv.ControlPlane // set by needCluster
	client kubernetes.Interface  // set by needCluster
	bins   string                // the built update-operator binary, set by needOperatorBinary

	clusterOnce sync.Once
	kubeletStop context.CancelFunc = func() {}
	binsOnce    sync.Once
	binsErr     error
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubeletStop()
	shared.Close()
	os.Exit(code)
}

// needCluster is the first call of every test that needs the control plane: it skips the test
// under -short, and otherwise fills cp and client (starting the control plane and the pod kubelet
// stand-in on first use).
func needCluster(t testing.TB) {
	t.Helper()
	c := shared.Need(t)
	clusterOnce.Do(func() {
		cp, client = c, c.Client()
		var ctx context.Context
		ctx, kubeletStop = context.WithCancel(context.Background())
		testenv.PodKubelet(ctx, client)
	})
}

// needOperatorBinary is needCluster plus the update-operator binary in bins (built on first use).
func needOperatorBinary(t testing.TB) {
	t.Helper()
	needCluster(t)
	binsOnce.Do(func() {
		var b operatorproc.Binary
		if b, binsErr = operatorproc.Build(context.Background(), filepath.Join(shared.Dir(), "bin"), ""); binsErr == nil {
			bins = b.Path
		}
	})
	if binsErr != nil {
		t.Fatalf("building update-operator: %v", binsErr)
	}
}

// cleanNodes deletes every Node (and the test namespace's pods) when the test ends: the budget counts
// every Node in the cluster, so tests must not leave any behind.
func cleanNodes(t *testing.T) {
	t.Cleanup(func() {
		ctx := context.Background()
		_ = client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			l, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0, nil
		})
	})
}

type opOptions struct {
	max        string
	before     []string
	after      []string
	drainTO    time.Duration
	now        func() time.Time
	retryBase  time.Duration
	forceDrain bool
	policy     operator.DrainPolicy
	// Trust: stall reporting, admission fencing, metrics.
	rebootTimeout time.Duration
	stallPolicy   stall.SlotPolicy
	fence         func(context.Context) (fence.Term, error)
	metrics       *operator.Metrics
	// spec changes the policy's Spec (what opSpec built of the options) before it is compiled.
	spec func(*policy.Spec)
	// tweak changes the Config last: what is no policy (Namespace, Blockers, Dynamic, ...).
	tweak func(*operator.Config)
	// started receives the controller before it runs (readiness).
	started func(*operator.Controller)
	// tap, when set, records every line the operator logs.
	tap *testenv.LogTap
}

// testSpec is the policy the in-process operators of these tests start from: the flags' defaults
// without --settle-pdbs and --wait-for-volume-detach (their gate informers and waits are for the
// tests that turn them on), with no --reboot-timeout (stall tests set one), draining with each pod's
// own grace period and retrying a failed drain within seconds.
func testSpec() policy.Spec {
	s := policy.Defaults()
	s.Settle.PDBs, s.Drain.WaitForVolumeDetach = false, false
	s.RebootTimeout = metav1.Duration{}
	s.Drain.Timeout, s.Drain.GracePeriod = metav1.Duration{Duration: 30 * time.Second}, metav1.Duration{Duration: -1}
	s.Drain.RetryBase, s.Drain.RetryMax = metav1.Duration{Duration: 500 * time.Millisecond}, metav1.Duration{Duration: 2 * time.Second}
	return s
}

// opSpec is testSpec with what o sets, and o.spec's changes.
func opSpec(o opOptions) policy.Spec {
	s := testSpec()
	if o.max != "" {
		s.MaxUnavailable = o.max
	}
	s.Hooks = policy.Hooks{Before: o.before, After: o.after}
	if o.drainTO != 0 {
		s.Drain.Timeout = metav1.Duration{Duration: o.drainTO}
	}
	if o.retryBase != 0 {
		s.Drain.RetryBase = metav1.Duration{Duration: o.retryBase}
	}
	s.Drain.Force = o.forceDrain
	if o.policy != "" {
		s.Drain.FailurePolicy = string(o.policy)
	}
	s.RebootTimeout = metav1.Duration{Duration: o.rebootTimeout}
	if o.stallPolicy != "" {
		s.StallPolicy = string(o.stallPolicy)
	}
	if o.spec != nil {
		o.spec(&s)
	}
	return s
}

// startOperator runs the controller in-process (no leader election) until the test ends.
func startOperator(t *testing.T, o opOptions) context.CancelFunc {
	t.Helper()
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	cfg := operator.Config{
		Policy:   *policy.MustCompile(opSpec(o)),
		Client:   client,
		Recorder: tapRecorder{broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "slipway-update-operator"})},
		Log:      klog.Background().WithName(t.Name()),
		Now:      o.now,
		Fence:    o.fence,
		Metrics:  o.metrics,
		// Held nodes are asked about again after 1 s, not 10: the tests that change what a blocker
		// reads (a Deployment's status, an alert) see the answer within their waits at once.
		BlockerRetry: time.Second,
	}
	if o.tap != nil {
		cfg.Log = o.tap.Logger(cfg.Log)
	}
	if o.tweak != nil {
		o.tweak(&cfg)
	}
	c, err := operator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.started != nil {
		o.started(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil {
			t.Errorf("operator: %v", err)
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			broadcaster.Shutdown()
		})
	}
	t.Cleanup(stop)
	return stop
}

func getNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitNode polls until cond holds for the node, failing the test after timeout.
func waitNode(t *testing.T, name string, timeout time.Duration, what string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	return testenv.MustWaitNode(t, client, name, timeout, what, cond)
}

// finished: FLUO's final state after a cycle.
func finished(n *corev1.Node) bool {
	a := n.Annotations
	_, cordonMark := a[protocol.Cordoned]
	return a[protocol.RebootOK] == protocol.False && a[protocol.RebootNeeded] == protocol.False &&
		a[protocol.RebootInProgress] == protocol.False && !cordonMark && n.Labels[protocol.AfterReboot] == "" &&
		a[protocol.LastRebootTime] != ""
}

// budgetWatcher sees every change of every Node through a watch (not sampling) and tracks the largest
// number of nodes unavailable at any instant, judged by the independent referee (internal/testsupport/referee:
// reboot-ok, Slipway's cordon mark, unschedulable, NotReady, reboot-in-progress), not by
// protocol.Observe, which is what the operator itself counts with: a mistake there must not be able to
// hide from the test.
type budgetWatcher struct {
	testenv.Peak
	mu     sync.Mutex
	state  map[string]bool
	starts map[string]int // times each node became unavailable
	stop   func()
}

func watchBudget(t *testing.T) *budgetWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &budgetWatcher{state: map[string]bool{}, starts: map[string]int{}, stop: cancel}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wi, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		w.observe(&list.Items[i])
	}
	go func() {
		for ev := range wi.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				w.mu.Lock()
				delete(w.state, n.Name)
				w.mu.Unlock()
				w.Forget(n.Name)
				continue
			}
			w.observe(n)
		}
	}()
	t.Cleanup(cancel)
	return w
}

func (w *budgetWatcher) observe(n *corev1.Node) {
	in := len(referee.Unavailable(n)) > 0
	w.Set(n.Name, in)
	w.mu.Lock()
	defer w.mu.Unlock()
	if in && !w.state[n.Name] {
		w.starts[n.Name]++
	}
	w.state[n.Name] = in
}
func (w *budgetWatcher) Starts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.starts {
		out[k] = v
	}
	return out
}

// simNodes starts n simulated nodes (real dbus-daemon, stand-ins, real agent) named prefix-0..n-1.
func simNodes(t *testing.T, prefix string, n int) []*simnode.Node {
	t.Helper()
	return simNodesWith(t, prefix, n, simnode.Options{})
}

// simNodesWith is simNodes with more options for each node (client, directory, log and reboot delay
// are filled in).
func simNodesWith(t *testing.T, prefix string, n int, o simnode.Options) []*simnode.Node {
	t.Helper()
	var out []*simnode.Node
	for i := 0; i < n; i++ {
		o.Client, o.Dir, o.Log, o.RebootDelay = client, t.TempDir(), klog.Background(), 200*time.Millisecond
		sn, err := simnode.New(context.Background(), fmt.Sprintf("%s-%d", prefix, i), o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sn)
		t.Cleanup(sn.Stop)
	}
	// Agents report first (status, boot ID, labels) before anything is fired.
	for _, sn := range out {
		waitNode(t, sn.Name, 20*time.Second, "agent reports", func(n *corev1.Node) bool {
			return n.Annotations[protocol.BootID] == sn.BootID() && n.Annotations[protocol.Status] != ""
		})
	}
	return out
}

// workload creates a ReplicaSet object (no controller runs to scale it) and pods it owns on node, so
// drains treat them as managed pods and the garbage collector leaves them alone.
func workload(t *testing.T, ns, name, node string, replicas int) {
	t.Helper()
	nodes := make([]string, replicas)
	for i := range nodes {
		nodes[i] = node
	}
	workloadOn(t, ns, name, nodes...)
}

// workloadOn is workload with one pod on each of nodes.
func workloadOn(t *testing.T, ns, name string, nodes ...string) {
	t.Helper()
	ctx := context.Background()
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	labels := map[string]string{"app": name}
	replicas := len(nodes)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/app:1"}}},
			},
		},
	}
	rs, err := client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, node := range nodes {
		replicaPod(t, rs, fmt.Sprintf("%s-%d", name, i), node)
	}
	if err := testenv.WaitPodsRunning(ctx, client, ns, "app="+name, replicas); err != nil {
		t.Fatalf("pods of %s not running: %v", name, err)
	}
}

// replicaPod creates a pod of rs on node (what the ReplicaSet controller and the scheduler would do).
func replicaPod(t *testing.T, rs *appsv1.ReplicaSet, name, node string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: rs.Namespace, Labels: rs.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr(true)}},
		},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/app:1"}}},
	}
	if _, err := client.CoreV1().Pods(rs.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func podsOn(t *testing.T, node string) int {
	t.Helper()
	l, err := client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// waitEvent reports whether an Event with reason shows up on the node within 15 s: the recorder
// sends Events asynchronously, after the Node change a test waits for.
func waitEvent(t *testing.T, node, reason string) bool {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if events(t, node, reason) > 0 {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func events(t *testing.T, node, reason string) int {
	t.Helper()
	l, err := client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + node + ",reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

func ptr[T any](v T) *T { return &v }

// benchNodes and benchOperator are simNodes and startOperator for benchmarks. Without -v the
// benchmark's agents and operator log nowhere: `make bench` prints results, not a line per agent.
func benchNodes(b *testing.B, prefix string, n int) []*simnode.Node {
	b.Helper()
	quietBench(b)
	ctx := context.Background()
	_ = client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	var out []*simnode.Node
	for i := 0; i < n; i++ {
		sn, err := simnode.New(ctx, fmt.Sprintf("%s-%d", prefix, i), simnode.Options{
			Client: client, Dir: b.TempDir(), Log: klog.Background(), RebootDelay: 20 * time.Millisecond,
		})
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, sn)
	}
	for _, sn := range out {
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			n, err := client.CoreV1().Nodes().Get(ctx, sn.Name, metav1.GetOptions{})
			return err == nil && n.Annotations[protocol.BootID] == sn.BootID() && n.Annotations[protocol.Status] != "", nil
		})
		if err != nil {
			b.Fatalf("%s: agent never reported", sn.Name)
		}
	}
	return out
}

func benchOperator(b *testing.B, max string) func() {
	quietBench(b)
	spec := testSpec()
	spec.MaxUnavailable = max
	// The benchmarks' drains retry at the flags' pace (what they ran with), not at testSpec's.
	spec.Drain.RetryBase, spec.Drain.RetryMax = policy.Defaults().Drain.RetryBase, policy.Defaults().Drain.RetryMax
	c, err := operator.New(operator.Config{Client: client, Log: klog.Background(), Policy: *policy.MustCompile(spec)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	return func() { cancel(); <-done }
}

// quietBench sends klog nowhere for the rest of b unless the run is verbose.
func quietBench(b *testing.B) {
	if testing.Verbose() {
		return
	}
	testenv.KlogTo(io.Discard)
	b.Cleanup(func() { klog.SetOutput(os.Stderr) })
}
