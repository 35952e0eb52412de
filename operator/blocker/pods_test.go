package blocker

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

type podSource struct {
	idx    cache.Indexer
	synced bool
}

func (s podSource) GetIndexer() cache.Indexer { return s.idx }
func (s podSource) HasSynced() bool           { return s.synced }

func pod(ns, name, nodeName string, phase corev1.PodPhase, lbl map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl},
		Spec:       corev1.PodSpec{NodeName: nodeName},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func TestPodsKnownAnswers(t *testing.T) {
	backup := map[string]string{"app": "backup"}
	pods := []*corev1.Pod{
		pod("ops", "backup-1", "n1", corev1.PodRunning, backup),
		pod("ops", "backup-0", "n1", corev1.PodPending, backup),
		pod("ops", "backup-old", "n2", corev1.PodSucceeded, backup),
		pod("ops", "backup-broken", "n2", corev1.PodFailed, backup),
		pod("ops", "backup-lost", "n4", corev1.PodUnknown, backup),
		pod("db", "pg-0", "n2", corev1.PodRunning, map[string]string{"app": "pg", "tier": "db"}),
		pod("db", "pg-1", "", corev1.PodPending, map[string]string{"app": "pg", "tier": "db"}),
		pod("web", "web-1", "n3", corev1.PodRunning, map[string]string{"app": "web"}),
	}
	cases := []struct {
		name      string
		onNode    bool
		selectors []string
		node      string
		reason    string // "" = not blocked
	}{
		{"on node, two pods", true, []string{"app=backup"}, "n1", "2 blocking pods running on node n1: ops/backup-0 (app=backup), ops/backup-1 (app=backup)"},
		{"finished pods do not count", true, []string{"app=backup"}, "n2", ""},
		{"phase Unknown counts", true, []string{"app=backup"}, "n4", "1 blocking pod running on node n4: ops/backup-lost (app=backup)"},
		{"other node's pods do not count", true, []string{"app=backup"}, "n3", ""},
		{"second selector", true, []string{"app=backup", "tier in (db)"}, "n2", "1 blocking pod running on node n2: db/pg-0 (tier in (db))"},
		{"set-based selector", true, []string{"app notin (web,pg)", "!app"}, "n3", ""},
		{"in cluster", false, []string{"tier=db"}, "n3", "2 blocking pods running in the cluster: db/pg-0 (tier=db) on n2, db/pg-1 (tier=db)"},
		{"in cluster, many", false, []string{"app"}, "n9", "6 blocking pods running in the cluster: db/pg-0 (app) on n2, db/pg-1 (app), ops/backup-0 (app) on n1 (+3 more)"},
		{"in cluster, none", false, []string{"app=cron"}, "n1", ""},
	}
	for _, indexed := range []bool{true, false} {
		indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
		if indexed {
			indexers[NodeNameIndex] = nodeNameIndexFunc
		}
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
		for _, p := range pods {
			if err := idx.Add(p); err != nil {
				t.Fatal(err)
			}
		}
		src := podSource{idx: idx, synced: true}
		for _, c := range cases {
			newPods := NewPodsInCluster
			if c.onNode {
				newPods = NewPodsOnNode
			}
			b, err := newPods(src, c.selectors)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			blocked, reason := b.Check(context.Background(), node(c.node))
			if blocked != (c.reason != "") || reason != c.reason {
				t.Errorf("%s (indexed %v): got (%v, %q), want %q", c.name, indexed, blocked, reason, c.reason)
			}
			if b.FleetWide() == c.onNode || (b.Name() == NamePodsOnNode) != c.onNode {
				t.Errorf("%s: FleetWide %v Name %q", c.name, b.FleetWide(), b.Name())
			}
		}
	}
}

func TestPodsFailClosed(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	b, err := NewPodsOnNode(podSource{idx: idx, synced: false}, []string{"app=backup"})
	if err != nil {
		t.Fatal(err)
	}
	if blocked, reason := b.Check(context.Background(), node("n1")); !blocked || reason != "pod cache not synced yet" {
		t.Errorf("unsynced cache: got (%v, %q)", blocked, reason)
	}
	b, _ = NewPodsOnNode(podSource{idx: idx, synced: true}, []string{"app=backup"})
	if blocked, _ := b.Check(context.Background(), nil); !blocked {
		t.Error("nil node admitted")
	}
	_ = idx.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-a-pod"}})
	if blocked, reason := b.Check(context.Background(), node("n1")); !blocked || reason != "check failed: pod cache holds a *v1.Node" {
		t.Errorf("foreign object: got (%v, %q)", blocked, reason)
	}
}

func TestParseSelectors(t *testing.T) {
	for _, bad := range []string{"", "  ", "=x", "app in (", "a b"} {
		if _, err := ParseSelectors([]string{"ok=1", bad}); err == nil {
			t.Errorf("ParseSelectors(%q) accepted", bad)
		}
	}
	if _, err := NewPodsOnNode(podSource{}, nil); err == nil {
		t.Error("no selectors accepted")
	}
	if _, err := NewPodsOnNode(nil, []string{"a=b"}); err == nil {
		t.Error("no pod source accepted")
	}
	sels, err := ParseSelectors([]string{" app=backup ", "tier in (db,cache)", "!canary"})
	if err != nil || len(sels) != 3 || sels[1].String() != "tier in (cache,db)" {
		t.Errorf("ParseSelectors: %v %v", sels, err)
	}
}

func TestStripPodKeepsWhatTheBlockersRead(t *testing.T) {
	p := pod("ops", "backup-1", "n1", corev1.PodRunning, map[string]string{"app": "backup"})
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "x"}}
	p.Annotations = map[string]string{"big": "value"}
	out, err := StripPod(p)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Pod)
	if s.Name != "backup-1" || s.Namespace != "ops" || s.Labels["app"] != "backup" || s.Spec.NodeName != "n1" ||
		s.Status.Phase != corev1.PodRunning || s.Annotations != nil || s.Spec.Containers != nil {
		t.Errorf("StripPod = %+v", s)
	}
}
