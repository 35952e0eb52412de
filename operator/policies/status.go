package policies

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/policy"
)

// NodesChanged says a node's admission entry changed: the pools' statuses are written again within
// statusEvery. One key for every pool, so a burst of node changes costs one queue entry, not one per
// pool per change.
func (r *Runtime) NodesChanged() {
	if r.pools.Load() != nil {
		r.queue.AddAfter(statusKey, statusEvery)
	}
}

// counts are the index's entries grouped as the statuses read them, for one index generation: each
// policy's status is its own key, and fifty of them after one change group the fleet once.
type counts struct {
	gen      uint64
	byPolicy map[string][]admission.Node        // policy -> its nodes' entries
	tied     map[string][]string                // policy -> nodes that tie between it and another
	fleet    map[string]*admission.VersionStats // canary places and proof are the fleet's
}

func (r *Runtime) grouped() *counts {
	r.countsMu.Lock()
	defer r.countsMu.Unlock()
	gen := r.cfg.Index.Gen()
	if r.counts != nil && r.counts.gen == gen {
		return r.counts
	}
	entries := r.cfg.Index.EntriesByName()
	c := &counts{gen: gen, byPolicy: map[string][]admission.Node{}, tied: map[string][]string{}}
	all := make([]admission.Node, 0, len(entries))
	for node, e := range entries {
		all = append(all, e)
		c.byPolicy[e.Policy] = append(c.byPolicy[e.Policy], e)
		for _, name := range strings.Split(e.PolicyTied, ", ") {
			if name != "" {
				c.tied[name] = append(c.tied[name], node)
			}
		}
	}
	c.fleet = admission.VersionsOf(all)
	r.counts = c
	return c
}

// writeStatus writes RebootPolicy name's status when it changed: its nodes, the window, canaries and
// conditions. A policy deleted meanwhile is skipped; a conflict is retried by the queue. A window
// opens or an exclusion ends without any node changing: it looks again then (at most every 5
// minutes), so window and nextOpen do not go stale on an idle fleet.
func (r *Runtime) writeStatus(ctx context.Context, name string) error {
	set, inf := r.pools.Load(), r.informer()
	p := set.Get(name)
	if p == nil || inf == nil {
		return nil
	}
	now := r.cfg.Now()
	again := 5 * time.Minute
	if s := p.Admission.Schedule; s != nil && !s.Open(now) {
		if next := s.NextOpen(now); !next.IsZero() && next.Sub(now) < again {
			again = max(next.Sub(now)+time.Second, time.Second)
		}
	}
	r.queue.AddAfter(name, again)
	obj, ok, err := inf.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil
	}
	rp, err := toRebootPolicy(obj)
	if err != nil {
		return nil
	}
	c := r.grouped()
	st := policyStatus(p, rp.Status, c.byPolicy[name], c.fleet, c.tied[name], r.cfg.Nodes.Memory(), now)
	if equality.Semantic.DeepEqual(st, rp.Status) {
		return nil
	}
	rp.Status = st
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rp)
	if err != nil {
		return err
	}
	_, err = r.cfg.Dynamic.Resource(v1alpha1.Resource).UpdateStatus(ctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing the status of RebootPolicy %s: %w", name, err)
	}
	return nil
}

// policyStatus is pool p's status: counts from the index entries of its nodes, the window now, where
// each OS version's canaries stand, and the conditions (their transition times kept from old).
func policyStatus(p *policy.Pool, old v1alpha1.RebootPolicyStatus, mine []admission.Node, fleetStats map[string]*admission.VersionStats, tied []string, sw admission.Memory, now time.Time) v1alpha1.RebootPolicyStatus {
	st := v1alpha1.RebootPolicyStatus{ObservedGeneration: p.Generation, Conditions: append([]metav1.Condition(nil), old.Conditions...)}
	newest := ""
	for _, e := range mine {
		for _, v := range []string{e.Version, e.AskedVersion} {
			if protocol.CompareVersions(protocol.NormalVersion(v), newest) > 0 {
				newest = protocol.NormalVersion(v)
			}
		}
	}
	for _, e := range mine {
		st.Nodes++
		switch {
		case e.State.InCycle():
			st.InCycle++
		case e.Waiting():
			st.Waiting++
		}
		if e.Settling != "" {
			st.Settling++
		}
		if e.Counts {
			st.Unavailable++
		}
		if newest != "" && protocol.NormalVersion(e.Version) == newest && !e.State.InCycle() && !e.Waiting() {
			st.UpToDate++
		}
	}
	cond := func(typ string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: p.Generation, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))})
	}
	if p.Err != "" {
		reason := "Invalid"
		if strings.HasPrefix(p.Err, TooMany+":") {
			reason = TooMany
		}
		cond("Accepted", false, reason, p.Err+"; its waiting nodes are held (blocked-by policy)")
	} else {
		cond("Accepted", true, "Compiled", "the spec compiled; nodes matching it follow it from their next admission")
	}
	a := p.Admission
	var next time.Time
	if st.Window, next = p.Window(now); !next.IsZero() {
		t := metav1.NewTime(next)
		st.NextOpen = &t
	}
	if a.Paused != "" {
		cond("Paused", true, "SpecPaused", a.Paused)
	} else {
		cond("Paused", false, "NotPaused", "")
	}
	if len(tied) > 0 {
		sort.Strings(tied)
		cond("Overlapping", true, "SamePriority", fmt.Sprintf("%d node(s) also match another RebootPolicy of priority %d and are held: %s", len(tied), p.Priority, nodes.Names(tied, 5)))
	} else {
		cond("Overlapping", false, "NoOverlap", "")
	}
	if st.InCycle > 0 {
		cond("Progressing", true, "NodesInCycle", fmt.Sprintf("%d node(s) in their reboot cycle", st.InCycle))
	} else {
		cond("Progressing", false, "Idle", "")
	}
	halted, held := []string{}, []string{}
	// The versions the pool's nodes ask for; where their canaries stand is the fleet's (canary proof and
	// places are counted over every node, as admission counts them).
	stats := admission.VersionsOf(mine)
	var versions []string
	for v := range stats {
		versions = append(versions, v)
	}
	sort.Strings(versions)
	for _, v := range versions {
		s := stats[v]
		if s.Asking == 0 && s.InFlight == 0 {
			continue
		}
		vs := v1alpha1.VersionStatus{Version: v, Asking: int32(s.Asking)}
		if fs := fleetStats[v]; fs != nil {
			full := admission.WithMemory(*fs, v, sw)
			var resumed time.Time
			if sw != nil {
				resumed = sw.VersionResumedAt(v)
			}
			if a.Canary.On() {
				cs := admission.CanaryOf(full, a.Canary, resumed, now, 0)
				if cs.State != "off" {
					vs.Canary = cs.State
				}
				if cs.State == "halted" {
					halted = append(halted, v)
				}
			}
			_, personHalt := haltOf(sw, v)
			pr := admission.ProofOf(v, full, a.Canary, resumed, personHalt, now)
			vs.Finished = int32(pr.Finished)
			if !pr.ProvenSince.IsZero() {
				t := metav1.NewTime(pr.ProvenSince)
				vs.ProvenSince = &t
			}
		}
		if rules := a.Versions; s.Asking > 0 && !rules.Empty() {
			var first time.Time
			if m, ok := sw.(admission.FirstSeen); ok {
				first = m.VersionFirstSeen(v)
			}
			if d := rules.Decide(v, first, now); !d.Allowed {
				vs.Held = d.Reason
				held = append(held, v+" "+d.Reason)
			}
		}
		st.Versions = append(st.Versions, vs)
	}
	if len(held) > 0 {
		cond("VersionsAllowed", false, "VersionsHeld", fmt.Sprintf("nodes asking for a version the policy's versions rules hold back wait (blocked-by version): %s", strings.Join(held, "; ")))
	} else {
		cond("VersionsAllowed", true, "AllAllowed", "every version the pool's nodes ask for is allowed")
	}
	if len(halted) > 0 {
		cond("Halted", true, "VersionHalted", "halted: "+strings.Join(halted, ", ")+" (kubectl slipway resume --version V)")
	} else {
		cond("Halted", false, "NoHalt", "")
	}
	kstatus(cond, p, a, st, mine, halted, sw, now)
	// Transition times only move when a condition's status does (meta.SetStatusCondition); a status
	// otherwise equal to the old one is not written.
	return st
}

// haltOf is a person's halt of v in force, when sw knows halts.
func haltOf(sw admission.Memory, v string) (string, bool) {
	if h, ok := sw.(admission.Halts); ok {
		if x, ok := h.VersionHalt(v); ok {
			return x.By, true
		}
	}
	return "", false
}

// kstatus sets the conditions GitOps engines wait on (the kstatus conventions Flux and Argo CD
// read): Reconciling while the pool's nodes are in a cycle or wait to start one (a roll-out under
// way); Stalled while it cannot go on without a person: its spec was refused, a version it asks for is
// halted (by its canaries or a person), or a node asks for a version it failed on or stalled in its
// cycle; Ready when it is accepted, not stalled, and every node runs a version the pool's rules
// allow (a minimum age aside: a version already running was staged long enough ago).
func kstatus(cond func(typ string, ok bool, reason, msg string), p *policy.Pool, a *admission.Rules, st v1alpha1.RebootPolicyStatus,
	mine []admission.Node, halted []string, sw admission.Memory, now time.Time) {
	var failed, stalled, personHalted, denied int
	for _, e := range mine {
		asked := protocol.NormalVersion(e.AskedVersion)
		switch {
		case e.FailedVersion != "" && asked == protocol.NormalVersion(e.FailedVersion):
			failed++
		case e.StalledVersion != "" && e.State.InCycle():
			stalled++
		case asked != "" && e.Waiting():
			if _, ok := haltOf(sw, asked); ok {
				personHalted++
			}
		}
		if v := protocol.NormalVersion(e.Version); v != "" && !a.Versions.Empty() {
			if d := a.Versions.Decide(v, time.Time{}, now); !d.Allowed && (d.Rule == "deny" || d.Rule == "allow") {
				denied++
			}
		}
	}
	var why []string
	if p.Err != "" {
		why = append(why, "its spec was refused: "+p.Err)
	}
	if len(halted) > 0 {
		why = append(why, "halted: "+strings.Join(halted, ", "))
	}
	for _, c := range []struct {
		n    int
		what string
	}{{failed, "ask for the version they failed on"}, {stalled, "stalled in their cycle"}, {personHalted, "ask for a version a person halted"}} {
		if c.n > 0 {
			why = append(why, fmt.Sprintf("%d node(s) %s", c.n, c.what))
		}
	}
	if len(why) > 0 {
		cond("Stalled", true, "NeedsAPerson", strings.Join(why, "; "))
	} else {
		cond("Stalled", false, "NotStalled", "")
	}
	if st.InCycle+st.Waiting > 0 {
		cond("Reconciling", true, "RollingOut", fmt.Sprintf("%d node(s) in their reboot cycle, %d waiting to start one", st.InCycle, st.Waiting))
	} else {
		cond("Reconciling", false, "Idle", "")
	}
	switch {
	case len(why) > 0:
		cond("Ready", false, "Stalled", strings.Join(why, "; "))
	case denied > 0:
		cond("Ready", false, "VersionNotAllowed", fmt.Sprintf("%d node(s) run a version the pool's versions rules do not allow", denied))
	default:
		cond("Ready", true, "AllowedAndHealthy", fmt.Sprintf("%d node(s), each on a version the pool allows; none held for a failure or a halt", st.Nodes))
	}
}
