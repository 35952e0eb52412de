package blocker

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// PodSource is a pod informer (a cache.SharedIndexInformer fits). The pod blockers read its store, so
// a check costs no API call, and they block while it has not synced: an empty cache is not proof
// that no pod runs.
type PodSource interface {
	GetIndexer() cache.Indexer
	HasSynced() bool
}

// NodeNameIndex indexes pods by spec.nodeName. With it (NewPodInformer adds it) a per-node check reads
// only that node's pods instead of every pod in the cluster.
const NodeNameIndex = "slipway.dev/pod-node-name"

func nodeNameIndexFunc(obj interface{}) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}

// NewPodInformer returns a pod informer fit for the pod blockers: it lists and watches only pods
// that have not finished (a field selector leaves Succeeded and Failed pods on the server), keeps of
// each pod only what the blockers read (StripPod), and indexes them by node. Start it with
// Run(ctx.Done()); the blockers block until it has synced.
func NewPodInformer(client kubernetes.Interface) cache.SharedIndexInformer {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = UnfinishedPods }),
		informers.WithTransform(StripPod))
	inf := f.Core().V1().Pods().Informer()
	// Cannot fail: the informer has not started and the index name is new.
	_ = inf.AddIndexers(cache.Indexers{NodeNameIndex: nodeNameIndexFunc})
	return inf
}

// UnfinishedPods is the field selector of pods that may still run: the same phases kured's
// --blocking-pod-selector counts, except that Unknown (a pod whose node stopped reporting) blocks
// here: it may well still be running.
const UnfinishedPods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)

// StripPod is an informer transform that keeps only what the pod blockers read (name, namespace,
// labels, deletion mark, node, phase): a cluster's pods held in memory cost a fraction of their size.
func StripPod(obj interface{}) (interface{}, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}, nil
}

// Pods blocks while a pod that has not finished matches one of its label selectors: on the node
// asking (NewPodsOnNode, kured's --blocking-pod-selector) or anywhere in the cluster
// (NewPodsInCluster). Pending and Running pods count, and so do pods being deleted (they run until
// they have terminated) and pods in phase Unknown; Succeeded and Failed pods never do.
type Pods struct {
	src       PodSource
	selectors []labels.Selector
	onNode    bool
}

// NewPodsOnNode blocks a node while pods matching any of selectors run on it.
func NewPodsOnNode(src PodSource, selectors []string) (*Pods, error) {
	return newPods(src, selectors, true)
}

// NewPodsInCluster blocks every node while pods matching any of selectors run anywhere in the
// cluster (including pods not yet scheduled).
func NewPodsInCluster(src PodSource, selectors []string) (*Pods, error) {
	return newPods(src, selectors, false)
}

func newPods(src PodSource, selectors []string, onNode bool) (*Pods, error) {
	if src == nil {
		return nil, fmt.Errorf("pod blocker: no pod informer")
	}
	sels, err := ParseSelectors(selectors)
	if err != nil {
		return nil, err
	}
	if len(sels) == 0 {
		return nil, fmt.Errorf("pod blocker: no label selector")
	}
	return &Pods{src: src, selectors: sels, onNode: onNode}, nil
}

// ParseSelectors reads label selectors in kubectl's syntax ("app=backup", "tier in (db,cache)",
// "!canary"). An empty selector is refused: it would match every pod and block for good.
func ParseSelectors(in []string) ([]labels.Selector, error) {
	out := make([]labels.Selector, 0, len(in))
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, fmt.Errorf("blocking pod selector is empty: it would match every pod; give a label selector such as app=backup")
		}
		sel, err := labels.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("blocking pod selector %q: %w", s, err)
		}
		if sel.Empty() {
			return nil, fmt.Errorf("blocking pod selector %q matches every pod", s)
		}
		out = append(out, sel)
	}
	return out, nil
}

// Name is NamePodsOnNode or NamePodsInCluster.
func (p *Pods) Name() string {
	if p.onNode {
		return NamePodsOnNode
	}
	return NamePodsInCluster
}

// FleetWide: pods anywhere in the cluster hold every node alike.
func (p *Pods) FleetWide() bool { return !p.onNode }

// Check implements Blocker.
func (p *Pods) Check(_ context.Context, node *corev1.Node) (bool, string) {
	if !p.src.HasSynced() {
		return true, "pod cache not synced yet"
	}
	if p.onNode && node == nil {
		return true, "check failed: no node given"
	}
	objs, err := p.candidates(node)
	if err != nil {
		return true, shorten("check failed: " + err.Error())
	}
	var hits []string
	for _, o := range objs {
		pod, ok := o.(*corev1.Pod)
		if !ok {
			return true, fmt.Sprintf("check failed: pod cache holds a %T", o)
		}
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.onNode && pod.Spec.NodeName != node.Name {
			continue
		}
		for _, sel := range p.selectors {
			if sel.Matches(labels.Set(pod.Labels)) {
				h := fmt.Sprintf("%s/%s (%s)", pod.Namespace, pod.Name, sel)
				if !p.onNode && pod.Spec.NodeName != "" {
					h = fmt.Sprintf("%s/%s (%s) on %s", pod.Namespace, pod.Name, sel, pod.Spec.NodeName)
				}
				hits = append(hits, h)
				break
			}
		}
	}
	if len(hits) == 0 {
		return false, ""
	}
	sort.Strings(hits)
	where := "in the cluster"
	if p.onNode {
		where = "on node " + node.Name
	}
	return true, shorten(fmt.Sprintf("%s running %s: %s", plural(len(hits), "blocking pod"), where, nameList(hits)))
}

func (p *Pods) candidates(node *corev1.Node) ([]interface{}, error) {
	store := p.src.GetIndexer()
	if p.onNode {
		if _, indexed := store.GetIndexers()[NodeNameIndex]; indexed {
			return store.ByIndex(NodeNameIndex, node.Name)
		}
	}
	return store.List(), nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
