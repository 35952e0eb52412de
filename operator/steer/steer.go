// Package steer says what Slipway writes on a Node around its cycle to steer pods and traffic away
// before the drain, and back after it: kured's PreferNoSchedule taint on nodes waiting for their turn,
// Kubernetes' exclude-from-external-load-balancers label for the cycle, and kured's pre- and
// post-reboot node labels. It only adds to a patch; the operator decides when (admission, cycle end,
// waiting) and sends it with the step's other writes.
//
// What Slipway added it marks (annotations prefer-no-schedule-taint, lb-excluded and
// steering-labels), and only what it marked it changes or removes: a taint or label someone else set,
// before the cycle or during it, stays theirs, with their value.
package steer

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
)

// Config is the steering flags; the zero value steers nothing.
type Config struct {
	// PreferNoScheduleTaint is --prefer-no-schedule-taint: the key of a PreferNoSchedule taint put on
	// a node while it waits for its turn ("" none).
	PreferNoScheduleTaint string
	// ExcludeFromLoadBalancers is --exclude-from-load-balancers: protocol.ExcludeFromLBs on the node
	// for the duration of its cycle.
	ExcludeFromLoadBalancers bool
	// Pre and Post are --pre-reboot-node-labels (written when the cycle starts, before the cordon)
	// and --post-reboot-node-labels (written when it ends, with the uncordon).
	Pre, Post []Label
}

// Label is one KEY=VALUE of --pre-reboot-node-labels or --post-reboot-node-labels, or KEY- (remove
// the label; kubectl label's syntax, which kured's flags lack).
type Label struct {
	Key, Value string
	Remove     bool
}

func (l Label) String() string {
	if l.Remove {
		return l.Key + "-"
	}
	return l.Key + "=" + l.Value
}

// ParseLabels reads the flag's entries. Keys must be label keys that are not Slipway's or FLUO's
// protocol keys (the cycle's own labels would be overwritten); a key may appear once.
func ParseLabels(specs []string) ([]Label, error) {
	var out []Label
	seen := map[string]bool{}
	for _, s := range specs {
		var l Label
		switch k, v, ok := strings.Cut(s, "="); {
		case ok:
			l = Label{Key: k, Value: v}
		case strings.HasSuffix(s, "-"):
			l = Label{Key: strings.TrimSuffix(s, "-"), Remove: true}
		default:
			return nil, fmt.Errorf("%q: want KEY=VALUE or KEY- (remove)", s)
		}
		if errs := validation.IsQualifiedName(l.Key); len(errs) > 0 {
			return nil, fmt.Errorf("%q: %q is not a label key: %s", s, l.Key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(l.Value); len(errs) > 0 {
			return nil, fmt.Errorf("%q: %q is not a label value: %s", s, l.Value, strings.Join(errs, "; "))
		}
		if owner, ok := protocol.Owners[l.Key]; ok || l.Key == protocol.ExcludeFromLBs {
			if !ok {
				owner = "operator's --exclude-from-load-balancers"
			}
			return nil, fmt.Errorf("%q: %s is written by the %s; use a label of your own", s, l.Key, owner)
		}
		if seen[l.Key] {
			return nil, fmt.Errorf("%q: %s is given twice", s, l.Key)
		}
		seen[l.Key] = true
		out = append(out, l)
	}
	return out, nil
}

// ValidateTaintKey checks --prefer-no-schedule-taint's key ("" is off).
func ValidateTaintKey(k string) error {
	if k == "" {
		return nil
	}
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return fmt.Errorf("%q is not a taint key: %s", k, strings.Join(errs, "; "))
	}
	return nil
}

// LabelKeys are the labels the operator may change with this configuration: what its admission
// policy lists as steeringLabels (deploy/base/operator-policy.yaml; Helm renders it from the same values).
func (c Config) LabelKeys() []string {
	var keys []string
	if c.ExcludeFromLoadBalancers {
		keys = append(keys, protocol.ExcludeFromLBs)
	}
	for _, l := range append(append([]Label{}, c.Pre...), c.Post...) {
		keys = append(keys, l.Key)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// Admit adds to p what a node's admission writes: the load-balancer exclusion (marked lb-excluded
// when Slipway added it) and the pre-reboot labels, those Conflict does not hold back.
func (c Config) Admit(p *nodes.Patch, n *corev1.Node) {
	if c.ExcludeFromLoadBalancers {
		if _, ok := n.Labels[protocol.ExcludeFromLBs]; !ok {
			p.SetLabel(n, protocol.ExcludeFromLBs, protocol.True)
			p.SetAnnotation(n, protocol.LBExcluded, protocol.True)
		}
	}
	c.labels(p, n, c.Pre, c.postValues())
}

// End adds to p what ending a cycle writes: the load-balancer exclusion and the waiting taint
// removed if Slipway added them (whatever the flags say now), then the post-reboot labels, but
// never over a label Slipway did not set (Kept names those).
func (c Config) End(p *nodes.Patch, n *corev1.Node) {
	if _, ok := n.Annotations[protocol.LBExcluded]; ok {
		// Only the value Slipway wrote: a value someone put there since is theirs now.
		if n.Labels[protocol.ExcludeFromLBs] == protocol.True {
			p.DeleteLabel(n, protocol.ExcludeFromLBs)
		}
		p.DeleteAnnotation(n, protocol.LBExcluded)
	}
	c.Taint(p, n, false)
	c.labels(p, n, c.Post, nil)
}

// Conflict is why n may not start its cycle yet ("" it may): a --pre-reboot-node-labels entry would
// change or remove a label Slipway did not set. Slipway neither clobbers it nor steers without it;
// a person removes the label (or the flag's entry) and the node goes. It is the admission blocker
// steering-label.
func (c Config) Conflict(n *corev1.Node) string {
	kept := c.Kept(n, true)
	if len(kept) == 0 {
		return ""
	}
	return "--pre-reboot-node-labels would change labels Slipway did not set: " + strings.Join(kept, ", ") + "; remove the label, or the flag's entry"
}

// Kept names the labels Admit (admission) or End leaves alone on n because Slipway did not set them
// there: "key=value (wants key=other)", for the step's Event; nil none.
func (c Config) Kept(n *corev1.Node, admission bool) []string {
	if admission {
		return c.labels(&nodes.Patch{}, n, c.Pre, c.postValues())
	}
	return c.labels(&nodes.Patch{}, n, c.Post, nil)
}

// Taint adds to p what keeps the waiting taint true: on, the PreferNoSchedule taint of
// --prefer-no-schedule-taint is on the node (added and marked unless the node already has that
// taint unmarked, someone else's); off, the taint Slipway marked is gone. A marked taint of another key (the flag changed) is
// removed either way.
func (c Config) Taint(p *nodes.Patch, n *corev1.Node, on bool) {
	marked := n.Annotations[protocol.PreferNoScheduleTaint]
	taints := n.Spec.Taints
	if marked != "" && (!on || marked != c.PreferNoScheduleTaint) {
		taints = slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return isPreferNoSchedule(t, marked) })
		p.DeleteAnnotation(n, protocol.PreferNoScheduleTaint)
		marked = ""
	}
	if on && c.PreferNoScheduleTaint != "" &&
		!slices.ContainsFunc(taints, func(t corev1.Taint) bool { return isPreferNoSchedule(t, c.PreferNoScheduleTaint) }) {
		taints = append(slices.Clone(taints), corev1.Taint{Key: c.PreferNoScheduleTaint, Effect: corev1.TaintEffectPreferNoSchedule})
		p.SetAnnotation(n, protocol.PreferNoScheduleTaint, c.PreferNoScheduleTaint)
	}
	p.SetTaints(n, taints)
}

func isPreferNoSchedule(t corev1.Taint, key string) bool {
	return t.Key == key && t.Effect == corev1.TaintEffectPreferNoSchedule
}

// postValues are the values --post-reboot-node-labels sets, by key.
func (c Config) postValues() map[string]string {
	m := map[string]string{}
	for _, l := range c.Post {
		if !l.Remove {
			m[l.Key] = l.Value
		}
	}
	return m
}

// owned reads protocol.SteeringLabels: the labels Slipway set on n that still carry the value it set.
// One removed or changed since is someone else's.
func owned(n *corev1.Node) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(n.Annotations[protocol.SteeringLabels], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if cur, has := n.Labels[k]; ok && has && cur == v {
			m[k] = v
		}
	}
	return m
}

// labels adds ls to p where n's labels are Slipway's to change, records what it set in
// protocol.SteeringLabels, and returns the entries it left alone ("key=value (wants key=other)"). A
// label is Slipway's when it is absent or recorded with the value it has; one that already has the
// value asked for is left as it is, unrecorded (a remove of it later leaves it too). At admission,
// back holds the post-reboot values: a label that has its key's value there is taken over, because
// the cycle's end writes that value back (what kured leaves on the nodes it rebooted).
func (c Config) labels(p *nodes.Patch, n *corev1.Node, ls []Label, back map[string]string) (kept []string) {
	own := owned(n)
	for _, l := range ls {
		cur, has := n.Labels[l.Key]
		_, mine := own[l.Key]
		if b, ok := back[l.Key]; ok && has && b == cur {
			mine = true
		}
		switch {
		case l.Remove && !has:
		case l.Remove && mine:
			p.DeleteLabel(n, l.Key)
			delete(own, l.Key)
		case !l.Remove && (!has || mine):
			p.SetLabel(n, l.Key, l.Value)
			own[l.Key] = l.Value
		case !l.Remove && cur == l.Value:
		default:
			kept = append(kept, fmt.Sprintf("%s=%s (wants %s)", l.Key, cur, l))
		}
	}
	rec := make([]string, 0, len(own))
	for k, v := range own {
		rec = append(rec, k+"="+v)
	}
	slices.Sort(rec)
	if len(rec) == 0 {
		p.DeleteAnnotation(n, protocol.SteeringLabels)
	} else {
		p.SetAnnotation(n, protocol.SteeringLabels, strings.Join(rec, ","))
	}
	return kept
}
