package blocker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator/admission"
)

// A real etcd + kube-apiserver, started by the first test that needs it (the unit tests and the
// Prometheus test do not) and stopped by TestMain.
var shared = &testenv.Shared{Name: "blocker"}

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

func apiServer(t *testing.T) kubernetes.Interface {
	t.Helper()
	return shared.Need(t).Client()
}

// eventually polls check until it returns "" (success) or 20 s pass; the informer's view lags the API.
func eventually(t *testing.T, what string, check func() string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		last = check()
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("%s: %s", what, last)
	}
}

func verdict(b admission.Blocker, n *corev1.Node, wantReason string) func() string {
	return func() string {
		blocked, reason := b.Check(context.Background(), n)
		if blocked != (wantReason != "") || reason != wantReason {
			return fmt.Sprintf("%s on %s: got (%v, %q), want %q", b.Name(), n.Name, blocked, reason, wantReason)
		}
		return ""
	}
}

func TestPodsAgainstAPIServer(t *testing.T) {
	client := apiServer(t)
	ctx := context.Background()
	const ns = "blocker-pods"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mk := func(name, nodeName string, lbl map[string]string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl},
			Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setPhase := func(name string, phase corev1.PodPhase) {
		t.Helper()
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = phase
		if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	inf := NewPodInformer(client)
	onNode, err := NewPodsOnNode(inf, []string{"app=backup", "tier in (db)"})
	if err != nil {
		t.Fatal(err)
	}
	inCluster, err := NewPodsInCluster(inf, []string{"app=migration"})
	if err != nil {
		t.Fatal(err)
	}
	n1, n2, n3 := node("n1"), node("n2"), node("n3")
	if blocked, reason := onNode.Check(ctx, n3); !blocked || reason != "pod cache not synced yet" {
		t.Errorf("before the informer runs: got (%v, %q)", blocked, reason)
	}
	stop := make(chan struct{})
	defer close(stop)
	go inf.Run(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}

	mk("backup-1", "n1", map[string]string{"app": "backup"}) // Pending: no kubelet runs it
	mk("pg-0", "n2", map[string]string{"tier": "db"})
	mk("web-1", "n3", map[string]string{"app": "web"})
	mk("backup-2", "n3", map[string]string{"app": "backup"})
	setPhase("backup-2", corev1.PodSucceeded)
	mk("migrate-1", "", map[string]string{"app": "migration"}) // not scheduled yet: still counts

	eventually(t, "pending pod on n1", verdict(onNode, n1, "1 blocking pod running on node n1: blocker-pods/backup-1 (app=backup)"))
	eventually(t, "second selector on n2", verdict(onNode, n2, "1 blocking pod running on node n2: blocker-pods/pg-0 (tier in (db))"))
	eventually(t, "succeeded pod on n3", verdict(onNode, n3, ""))
	eventually(t, "unscheduled pod anywhere", verdict(inCluster, n3, "1 blocking pod running in the cluster: blocker-pods/migrate-1 (app=migration)"))
	// The informer holds neither finished pods (the field selector) nor more of a pod than the blockers read.
	for _, o := range inf.GetIndexer().List() {
		p := o.(*corev1.Pod)
		if p.Name == "backup-2" {
			t.Error("the informer holds a Succeeded pod")
		}
		if p.Spec.Containers != nil {
			t.Errorf("pod %s not stripped", p.Name)
		}
	}

	setPhase("backup-1", corev1.PodRunning)
	eventually(t, "running pod on n1", verdict(onNode, n1, "1 blocking pod running on node n1: blocker-pods/backup-1 (app=backup)"))
	setPhase("backup-1", corev1.PodFailed)
	eventually(t, "failed pod on n1", verdict(onNode, n1, ""))
	// The migration gets scheduled, runs and finishes.
	if err := client.CoreV1().Pods(ns).Delete(ctx, "migrate-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mk("migrate-1", "n2", map[string]string{"app": "migration"})
	eventually(t, "scheduled migration", verdict(inCluster, n1, "1 blocking pod running in the cluster: blocker-pods/migrate-1 (app=migration) on n2"))
	setPhase("migrate-1", corev1.PodSucceeded)
	eventually(t, "finished migration", verdict(inCluster, n1, ""))
	// A pod being deleted still runs until its kubelet has stopped it (none here: it stays Terminating).
	if err := client.CoreV1().Pods(ns).Delete(ctx, "pg-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "terminating pod seen", func() string {
		o, ok, _ := inf.GetIndexer().GetByKey(ns + "/pg-0")
		if !ok || o.(*corev1.Pod).DeletionTimestamp == nil {
			return "pg-0 not yet seen terminating"
		}
		return ""
	})
	eventually(t, "terminating pod on n2", verdict(onNode, n2, "1 blocking pod running on node n2: blocker-pods/pg-0 (tier in (db))"))
	zero := int64(0)
	if err := client.CoreV1().Pods(ns).Delete(ctx, "pg-0", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod gone from n2", verdict(onNode, n2, ""))
}

func TestMinReadyAgainstAPIServer(t *testing.T) {
	client := apiServer(t)
	ctx := context.Background()
	for _, name := range []string{"mr-a", "mr-b", "mr-c", "mr-d"} {
		if _, err := testenv.CreateNode(ctx, client, name, "boot-1", nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, name := range []string{"mr-a", "mr-b", "mr-c", "mr-d"} {
			_ = client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	if _, err := testenv.SetNodeStatus(ctx, client, "mr-d", "boot-1", false); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, "mr-c", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(client, 0)
	lister := f.Core().V1().Nodes().Lister()
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	f.WaitForCacheSync(stop)
	list := func() ([]*corev1.Node, error) {
		all, err := lister.List(labels.Everything())
		var ours []*corev1.Node // other tests' nodes stay out of the count
		for _, n := range all {
			if strings.HasPrefix(n.Name, "mr-") {
				ours = append(ours, n)
			}
		}
		return ours, err
	}
	check := func(min string, name string, want string) {
		t.Helper()
		m, err := ParseMinReadyNodes(min)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewMinReady(m, list, nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err := lister.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "min "+min, verdict(b, n, want))
	}
	// a, b available; c cordoned; d NotReady.
	check("1", "mr-a", "")
	check("2", "mr-a", "admitting mr-a would leave 1 of 4 nodes Ready and schedulable, fewer than min-ready-nodes=2 (2)")
	check("2", "mr-d", "")
	check("50%", "mr-c", "")
	check("75%", "mr-c", "admitting mr-c would leave 2 of 4 nodes Ready and schedulable, fewer than min-ready-nodes=75% (3)")
	if _, err := client.CoreV1().Nodes().Patch(ctx, "mr-c", types.MergePatchType, []byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	check("2", "mr-a", "") // b and c now
}
