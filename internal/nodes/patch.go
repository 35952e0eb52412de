// Package nodes holds the Node plumbing both binaries share: minimal JSON merge patches of only the
// keys a writer owns (never GET+PUT of whole Nodes), an informer transform that drops what Slipway
// never reads, and an overlay that lets a writer see its own writes before the informer does.
package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// Patch is a JSON merge patch of a Node's annotations, labels, spec.unschedulable and spec.taints. A
// nil value deletes the key.
type Patch struct {
	Annotations   map[string]*string
	Labels        map[string]*string
	Unschedulable *bool
	// Taints, when set, replaces the whole list (a merge patch cannot change one entry of a list):
	// send it only with ResourceVersion, so a taint someone added meanwhile is never dropped.
	Taints *[]corev1.Taint
	// ResourceVersion, when set, makes the server refuse the patch (409 Conflict) if the Node changed
	// since the version the decision was made on.
	ResourceVersion string
	// UID is the Node the patch was computed for (Apply sets it): the server refuses the patch on a
	// Node deleted and created again under the same name, a machine the decision was not about
	// (Kubernetes' own NodeRestriction and PodGC bugs were writes keyed by name alone).
	UID types.UID
}

// Str returns a pointer to s, for Patch values.
func Str(s string) *string { return &s }

// SetAnnotation sets key=value, unless the node already has exactly that.
func (p *Patch) SetAnnotation(n *corev1.Node, key, value string) {
	if n != nil {
		if v, ok := n.Annotations[key]; ok && v == value {
			return
		}
	}
	if p.Annotations == nil {
		p.Annotations = map[string]*string{}
	}
	p.Annotations[key] = Str(value)
}

// DeleteAnnotation removes key, if the node has it.
func (p *Patch) DeleteAnnotation(n *corev1.Node, key string) {
	if n != nil {
		if _, ok := n.Annotations[key]; !ok {
			return
		}
	}
	if p.Annotations == nil {
		p.Annotations = map[string]*string{}
	}
	p.Annotations[key] = nil
}

// SetLabel sets key=value, unless the node already has exactly that.
func (p *Patch) SetLabel(n *corev1.Node, key, value string) {
	if n != nil {
		if v, ok := n.Labels[key]; ok && v == value {
			return
		}
	}
	if p.Labels == nil {
		p.Labels = map[string]*string{}
	}
	p.Labels[key] = Str(value)
}

// DeleteLabel removes key, if the node has it.
func (p *Patch) DeleteLabel(n *corev1.Node, key string) {
	if n != nil {
		if _, ok := n.Labels[key]; !ok {
			return
		}
	}
	if p.Labels == nil {
		p.Labels = map[string]*string{}
	}
	p.Labels[key] = nil
}

// SetUnschedulable sets spec.unschedulable, unless it already has that value.
func (p *Patch) SetUnschedulable(n *corev1.Node, v bool) {
	if n != nil && n.Spec.Unschedulable == v {
		return
	}
	p.Unschedulable = &v
}

// SetTaints sets spec.taints to ts, unless the node already has exactly that list.
func (p *Patch) SetTaints(n *corev1.Node, ts []corev1.Taint) {
	if n != nil && (len(n.Spec.Taints) == 0 && len(ts) == 0 || equality.Semantic.DeepEqual(n.Spec.Taints, ts)) {
		return
	}
	if ts == nil {
		ts = []corev1.Taint{}
	}
	p.Taints = &ts
}

// Empty reports whether the patch changes nothing.
func (p *Patch) Empty() bool {
	return len(p.Annotations) == 0 && len(p.Labels) == 0 && p.Unschedulable == nil && p.Taints == nil
}

// JSON renders the merge patch.
func (p *Patch) JSON() ([]byte, error) {
	meta := map[string]interface{}{}
	if len(p.Annotations) > 0 {
		meta["annotations"] = p.Annotations
	}
	if len(p.Labels) > 0 {
		meta["labels"] = p.Labels
	}
	if p.ResourceVersion != "" {
		meta["resourceVersion"] = p.ResourceVersion
	}
	if p.UID != "" {
		meta["uid"] = p.UID
	}
	body := map[string]interface{}{}
	if len(meta) > 0 {
		body["metadata"] = meta
	}
	spec := map[string]interface{}{}
	if p.Unschedulable != nil {
		spec["unschedulable"] = *p.Unschedulable
	}
	if p.Taints != nil {
		spec["taints"] = *p.Taints
	}
	if len(spec) > 0 {
		body["spec"] = spec
	}
	return json.Marshal(body)
}

// String is a short human form for logs: the keys it sets and deletes.
func (p *Patch) String() string {
	var parts []string
	add := func(kind string, m map[string]*string) {
		for k, v := range m {
			if v == nil {
				parts = append(parts, fmt.Sprintf("-%s %s", kind, k))
			} else {
				parts = append(parts, fmt.Sprintf("%s %s=%s", kind, k, *v))
			}
		}
	}
	add("annotation", p.Annotations)
	add("label", p.Labels)
	sort.Strings(parts)
	if p.Unschedulable != nil {
		parts = append(parts, fmt.Sprintf("spec.unschedulable=%t", *p.Unschedulable))
	}
	if p.Taints != nil {
		var ts []string
		for _, t := range *p.Taints {
			ts = append(ts, t.ToString())
		}
		parts = append(parts, "spec.taints=["+strings.Join(ts, " ")+"]")
	}
	return strings.Join(parts, ", ")
}

// Apply sends the patch to n, the Node it was computed for: conditional on n's UID, so a Node
// created again under n's name is never written with a decision about the old one. An empty patch
// sends nothing and returns (nil, nil).
func (p *Patch) Apply(ctx context.Context, c kubernetes.Interface, n *corev1.Node) (*corev1.Node, error) {
	if p.Empty() {
		return nil, nil
	}
	name := n.Name
	if p.UID == "" {
		p.UID = n.UID
	}
	body, err := p.JSON()
	if err != nil {
		return nil, err
	}
	out, err := c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("patching node %s (%s): %w", name, p, err)
	}
	return out, nil
}

// ApplyEffects adds the protocol effects to p (only those whose value differs on n).
func (p *Patch) ApplyEffects(n *corev1.Node, effects ...protocol.Effect) {
	for _, e := range effects {
		p.SetAnnotation(n, e.Key, e.Value)
		if e.Label {
			p.SetLabel(n, e.Key, e.Value)
		}
	}
}
