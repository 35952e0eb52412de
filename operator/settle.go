package operator

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/policy"
)

// SettleConfig is the policy's (package policy).
type SettleConfig = policy.SettleConfig

// settling says why node n, out of its cycle, still holds its slots now ("" it does not) and until
// when only time can end that (zero: a PDB recovering will; the PDB informer looks again then).
// The reason names no node and no time, so the blocked-by of the nodes waiting behind settling ones
// changes when the reason does, not with every node that finishes (at 1,000 nodes naming them cost
// every waiting node a write per finish: 49 writes per cycle instead of 8).
func (c *Controller) settling(n *corev1.Node, state protocol.State, now time.Time) (why string, until time.Time) {
	s := c.policies.For(n, false).Settle // the pool it is in now: its cycle (and pin) ended
	if s.Time <= 0 && !s.PDBs || state.InCycle() {
		return "", time.Time{}
	}
	last, err := time.Parse(time.RFC3339, n.Annotations[protocol.LastRebootTime])
	if err != nil {
		return "", time.Time{}
	}
	var parts []string
	if end := last.Add(s.Time); s.Time > 0 && now.Before(end) {
		parts = append(parts, "--settle-time "+s.Time.String())
		until = end
	}
	if s.PDBs && c.gates.pdbs != nil {
		if short := c.gates.shortPDBs(n.Annotations[protocol.SettlePDBs]); len(short) > 0 {
			deadline := last.Add(s.Timeout)
			switch {
			case now.Before(deadline):
				parts = append(parts, "PodDisruptionBudgets not yet back: "+strings.Join(short, ", "))
				if deadline.After(until) {
					until = deadline
				}
			case s.Hold:
				c.gates.settleTimedOut(n, last, short, s)
				parts = append(parts, "PodDisruptionBudgets not back within --settle-timeout "+s.Timeout.String()+", holding (--settle-timeout-policy=hold): "+strings.Join(short, ", "))
			default:
				c.gates.settleTimedOut(n, last, short, s)
			}
		}
	}
	return strings.Join(parts, "; "), until
}

// settleTimedOut reports, once per cycle of n, that its PDBs did not recover within --settle-timeout.
func (g *gates) settleTimedOut(n *corev1.Node, last time.Time, short []string, s SettleConfig) {
	key := last.UTC().Format(time.RFC3339)
	if old, ok := g.settleTimeouts.Swap(n.Name, key); ok && old == key {
		return
	}
	then := "the roll-out proceeds"
	if s.Hold {
		then = "its budget slots stay held until they do (--settle-timeout-policy=hold)"
	}
	g.cfg.Log.Info("PodDisruptionBudgets not back within the settle timeout", "node", n.Name, "timeout", s.Timeout.String(), "short", short)
	g.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "SettleTimeout", "PodDisruptionBudgets not back %s after the cycle finished (--settle-timeout): %s; %s",
		s.Timeout, strings.Join(short, ", "), then)
	if g.cfg.Metrics != nil {
		g.cfg.Metrics.settleTimeouts.Inc()
	}
}

// shortPDBs are the PDBs of a settle-pdbs value that allowed a disruption before the drain and allow
// none now, as "<ns>/<name> (allows 0, allowed m before the drain)": the next drain would be refused
// by them. A PDB gone is no longer short; a malformed entry (only the operator writes the key) is
// skipped.
func (g *gates) shortPDBs(value string) []string {
	var short []string
	for _, item := range strings.Split(value, ",") {
		key, num, ok := strings.Cut(item, "=")
		ns, name, ok2 := strings.Cut(key, "/")
		want, err := strconv.Atoi(num)
		if !ok || !ok2 || err != nil {
			continue
		}
		pdb, err := g.pdbs.PodDisruptionBudgets(ns).Get(name)
		if err != nil {
			continue
		}
		if got := int(pdb.Status.DisruptionsAllowed); got < min(want, 1) || pdb.Status.ObservedGeneration < pdb.Generation {
			short = append(short, fmt.Sprintf("%s (allows %d, allowed %d before the drain)", key, got, want))
		}
	}
	return short
}

// pdbsBefore is the settle-pdbs value of the pods a drain of node is about to evict (drainer.pdbs):
// the PDBs they fall under and the disruptions each allows now, read from the PDB informer. The pods
// are the drain's own list (one LIST for both). Pods the drain does not evict (DaemonSet, mirror)
// are not in it: their PDBs are not consumed. PDBs that allow no disruption now can never be short
// (shortPDBs) and are left out, and at most maxSettlePDBs are kept (keepSettlePDBs): a tenant with
// thousands of PDBs must not make the grant's PATCH exceed the API server's 256 KiB of annotations.
// The PDBs left out still gate the next drain's evictions themselves.
func (g *gates) pdbsBefore(node string, pods []corev1.Pod) string {
	seen := map[string]int32{}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		list, err := g.pdbs.PodDisruptionBudgets(p.Namespace).List(labels.Everything())
		if err != nil {
			continue // the informer's cache: only a broken index fails, and then there is nothing to read
		}
		for _, pdb := range list {
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(p.Labels)) {
				continue // no selector matches nothing (policy/v1); an empty one every pod of the namespace
			}
			seen[pdb.Namespace+"/"+pdb.Name] = pdb.Status.DisruptionsAllowed
		}
	}
	items, dropped := keepSettlePDBs(seen, maxSettlePDBs)
	if dropped > 0 {
		g.cfg.Log.Info("--settle-pdbs: more PodDisruptionBudgets than are kept; settling waits for those that allowed the fewest disruptions", "node", node, "pdbs", len(items)+dropped, "kept", len(items))
	}
	return strings.Join(items, ",")
}

// keepSettlePDBs is the settle-pdbs entries ("namespace/name=allowed", sorted by name) of the PDBs in
// seen that allowed a disruption, at most max of them: those that allowed the fewest (ties by name).
// They are the ones a drain can exhaust, so the settle waits for what matters; a tenant who adds
// PDBs (with many disruptions allowed, or named to sort first) cannot choose which ones are waited for.
func keepSettlePDBs(seen map[string]int32, max int) (items []string, dropped int) {
	type entry struct {
		key     string
		allowed int32
	}
	var all []entry
	for k, v := range seen {
		if v > 0 {
			all = append(all, entry{k, v})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].allowed != all[j].allowed {
			return all[i].allowed < all[j].allowed
		}
		return all[i].key < all[j].key
	})
	if len(all) > max {
		all, dropped = all[:max], len(all)-max
	}
	for _, e := range all {
		items = append(items, e.key+"="+strconv.Itoa(int(e.allowed)))
	}
	sort.Strings(items)
	return items, dropped
}

// maxSettlePDBs bounds the settle-pdbs annotation: 64 entries of at most 253+1+63+1+10 bytes each
// stay under 21 KiB, far from the 256 KiB all of a Node's annotations may take.
const maxSettlePDBs = 64
