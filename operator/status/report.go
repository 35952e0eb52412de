package status

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/slipway-dev/slipway/api/v1alpha1"
	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/nodes"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/policy"
	"github.com/slipway-dev/slipway/operator/stall"
)

// APIVersion names the JSON shape (see the package documentation).
const APIVersion = "status.slipway.dev/v1"

// Report is the fleet's reboot state at one instant; its JSON form is the documented -o json.
type Report struct {
	APIVersion string    `json:"apiVersion"`
	Time       time.Time `json:"time"`
	Namespace  string    `json:"namespace"`
	Fleet      Fleet     `json:"fleet"`
	Nodes      []Node    `json:"nodes"`
}

// Fleet is what holds or limits every node.
type Fleet struct {
	// Problems: what a person on call should look at first, most urgent first ([] when none).
	Problems  []Problem `json:"problems"`
	Published bool      `json:"published"`
	Leader    string    `json:"leader"`
	// OperatorVersion: the leading operator's version as it published it ("" unknown).
	OperatorVersion string `json:"operatorVersion"`
	// Lease is the leader Lease as the API server holds it now (nil: not found or not readable).
	Lease         *Lease        `json:"lease"`
	Paused        Pause         `json:"paused"`
	PausedGroups  []GroupPause  `json:"pausedGroups"`
	GroupLabel    string        `json:"groupLabel"`
	Budgets       []Budget      `json:"budgets"`
	Schedule      Schedule      `json:"schedule"`
	Blockers      []Blocker     `json:"blockers"`
	FailedReboots FailedReboots `json:"failedReboots"`
	// Versions: every OS version a node runs or asks for, newest name last.
	Versions []Version `json:"versions"`
	// RebootTimeout and SettleTime are --reboot-timeout and --settle-time as published ("" none, or
	// not published).
	RebootTimeout string `json:"rebootTimeout"`
	SettleTime    string `json:"settleTime"`
	// Cycles: the cycle durations the operator measured, which the versions' ETAs are computed from.
	Cycles Cycles `json:"cycles"`
	// Policies: the RebootPolicies (node pools), highest priority first ([] when none).
	Policies []PoolRow `json:"policies"`
}

// Cycles summarises the durations of the last cycles that finished (fleetswitch.Status.CycleSeconds).
type Cycles struct {
	Measured      int  `json:"measured"`
	MedianSeconds *int `json:"medianSeconds"` // nil: none measured
}

// Pause is the fleet switch.
type Pause struct {
	Paused bool       `json:"paused"`
	Reason string     `json:"reason"`
	By     string     `json:"by"`
	At     *time.Time `json:"at"`
}

// GroupPause is one group's switch.
type GroupPause struct {
	Group  string `json:"group"`
	Reason string `json:"reason"`
}

// Pools of Budget.Pool (admission.PoolKind).
const (
	PoolFleet        = string(admission.PoolFleet)
	PoolControlPlane = string(admission.PoolControlPlane)
	PoolGroup        = string(admission.PoolGroup)
	PoolPolicy       = string(admission.PoolPolicy)
)

// Budget is one pool of the budget: how many of its nodes are unavailable, and how many may be.
type Budget struct {
	Pool        string `json:"pool"`
	Group       string `json:"group"`
	Policy      string `json:"policy"`
	Nodes       int    `json:"nodes"`
	Unavailable int    `json:"unavailable"`
	Max         string `json:"max"`
	Limit       *int   `json:"limit"`
}

// Schedule is the reboot windows and exclusions, and whether a new cycle may start now.
type Schedule struct {
	Windows    []string   `json:"windows"`
	Exclusions []string   `json:"exclusions"`
	Known      bool       `json:"known"`
	Open       bool       `json:"open"`
	NextOpen   *time.Time `json:"nextOpen"`
	ClosedBy   string     `json:"closedBy"`
	Error      string     `json:"error"`
}

// Blocker is one fleet-wide reason not to start cycles.
type Blocker struct {
	Name   string    `json:"name"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// FailedReboots is the failure budget (--max-failed-reboots) of the current roll-out.
type FailedReboots struct {
	Nodes []string `json:"nodes"`
	Max   int      `json:"max"`
	// Paused: the operator paused the fleet because the budget was spent (its own switch, which only
	// resume --failures clears); Reason says why.
	Paused bool   `json:"paused"`
	Reason string `json:"reason"`
}

// Version is what the fleet shows of one OS version (admission.VersionsOf) and, when the operator
// published --canary-nodes or --max-failed-per-version, where its canaries stand (admission.CanaryOf).
type Version struct {
	Version string `json:"version"`
	On      int    `json:"on"`      // nodes running it, out of their cycle
	InCycle int    `json:"inCycle"` // nodes in their cycle for it
	Asking  int    `json:"asking"`  // nodes waiting to reboot for it
	Failed  int    `json:"failed"`  // failed cycles for it since it was last resumed
	// Canary: released, baking (until BakeEnd), canaries (more may go), waiting (for the canaries),
	// halted, or "" (canaries and halts off, or not published).
	Canary  string     `json:"canary"`
	BakeEnd *time.Time `json:"bakeEnd"`
	Resumed *time.Time `json:"resumed"` // when a person last ran resume --version for it (the API server's clock)
	// ResumedBy and ResumeReason: who resumed it last and why, as the fleet record keeps them.
	ResumedBy    string `json:"resumedBy"`
	ResumeReason string `json:"resumeReason"`
	// Proven: cycles Slipway ran for it that ended on it (the fleet record's canary proof). Unproven:
	// nodes on it that Slipway never rebooted onto it (new, replaced, rebooted by hand or relabelled):
	// they prove nothing for its canaries.
	Proven   int `json:"proven"`
	Unproven int `json:"unproven"`
	// ETASeconds: how long until its nodes asking or in their cycle are through: the wait for the reboot
	// window to open, then ETA; nil when none are left, it is halted, the fleet is paused, or unknown
	// (no cycle measured, no limit or window known).
	ETASeconds *int `json:"etaSeconds"`
}

// Problem is one thing to look at: what, which node ("" for the fleet), and what to do.
type Problem struct {
	Kind string `json:"kind"` // record-unreadable, no-operator, no-leader, paused, failures-paused, stalled, undrainable, version-halted, blocked, no-agent
	Node string `json:"node"`
	What string `json:"what"`
	Do   string `json:"do"`
}

// Lease is the operator's leader Lease.
type Lease struct {
	Holder   string     `json:"holder"`
	Renewed  *time.Time `json:"renewed"`
	Duration int        `json:"durationSeconds"`
	// Live: renewed within its duration (a leader is acting).
	Live bool `json:"live"`
}

// BlockedProblemAfter is how long a node may be held by something other than the plan (a pause, a
// blocker) before the view lists it under Problems.
const BlockedProblemAfter = time.Hour

// NoAgentAfter is how long a node must have been Ready without any agent's key before the view lists
// it under Problems: its update-agent pod starts once it is Ready.
const NoAgentAfter = protocol.NoAgentAfter

// Node is one node's row.
type Node struct {
	Name string `json:"name"`
	// OSVersion: the OS version its agent reports (os-release VERSION); AgentVersion: its agent's own
	// version ("" none reported).
	OSVersion    string `json:"osVersion"`
	AgentVersion string `json:"agentVersion"`
	// Policy: the RebootPolicy it belongs to ("" the flags' policy): pinned at its admission while in
	// its cycle, else the matching one of the highest priority; PolicyTied names the policies that tie
	// for it (it is held).
	Policy        string         `json:"policy"`
	PolicyTied    string         `json:"policyTied"`
	State         protocol.State `json:"state"`
	Since         *time.Time     `json:"since"`
	Group         string         `json:"group"`
	ControlPlane  bool           `json:"controlPlane"`
	Paused        bool           `json:"paused"`
	Ready         bool           `json:"ready"`
	Unschedulable bool           `json:"unschedulable"`
	Unavailable   bool           `json:"unavailable"`
	BlockedBy     string         `json:"blockedBy"`
	Stalled       string         `json:"stalled"`
	DrainError    string         `json:"drainError"`
	RebootError   string         `json:"rebootError"`
	LastReboot    *time.Time     `json:"lastReboot"`
	// WaitingSince: when it was first held waiting for its turn (update.slipway.dev/waiting-since).
	WaitingSince *time.Time `json:"waitingSince"`
	Undrainable  string     `json:"undrainable"`
	// StallHint: what to look at for its stall ("" when not stalled).
	StallHint string `json:"stallHint"`
	// Queue: its place in the order the operator admits waiting nodes (admission.Queue), from 1; 0 when
	// it is not in the queue (not waiting, reboot-paused, its fleet or group paused, or kept back by
	// --control-plane-order).
	Queue int `json:"queue"`
	// StallsAt: when it will be marked stalled if it stays in this stage of its cycle (stall.Of under the
	// published --reboot-timeout); nil when not in a cycle, stalled already, or unknown.
	StallsAt *time.Time `json:"stallsAt"`
	// NoAgent: no update-agent (FLUO's or Slipway's) nor the FleetLock server ever wrote any of their
	// keys on it, it has been Ready for NoAgentAfter and is not enrolled in FleetLock: it will never ask
	// to reboot.
	NoAgent bool `json:"noAgent"`
	// Channel and Server: the update channel (update.conf GROUP, FLUO's group label) and server its
	// agent reports it follows; WantChannel and WantServer what its pool declares (pool-group,
	// pool-server; "" none), UpdateConfError why its agent did not write them.
	Channel         string `json:"channel"`
	Server          string `json:"server,omitempty"`
	WantChannel     string `json:"wantChannel,omitempty"`
	WantServer      string `json:"wantServer,omitempty"`
	UpdateConfError string `json:"updateConfError,omitempty"`
}

// Build derives the report from the Nodes, the slipway-fleet ConfigMap (nil when there is none) and
// the fleet record (fleetrecord; the empty record when there is none) at the instant now. It never
// fails: what the objects do not say is reported as unknown.
func Build(nodes []corev1.Node, cm *corev1.ConfigMap, rec fleetrecord.Record, namespace string, now time.Time) Report {
	return BuildWithPolicies(nodes, cm, rec, nil, namespace, now)
}

// BuildWithPolicies is Build with the RebootPolicies (node pools): each node shows its policy, each
// policy its nodes, window and budget.
func BuildWithPolicies(nodes []corev1.Node, cm *corev1.ConfigMap, rec fleetrecord.Record, rps []v1alpha1.RebootPolicy, namespace string, now time.Time) Report {
	st, published := fleetswitch.ReadStatus(cm)
	sw := fleetswitch.Read(cm)
	set := settingsOf(cm, published)
	ps := poolsOf(rps, set)
	pol := set.pol
	if pol == nil {
		pol = &policy.Policy{StallPolicy: stall.Hold, ControlPlaneOrder: admission.OrderNone} // unknown: nothing limited
	}
	r := Report{
		APIVersion: APIVersion,
		Time:       now.UTC(),
		Namespace:  namespace,
		Nodes:      []Node{},
		Fleet: Fleet{
			Published:       published,
			Leader:          st.Leader,
			OperatorVersion: st.Version,
			Paused:          Pause{Paused: sw.Paused, Reason: sw.Reason, By: sw.By, At: timePtr(sw.At)},
			PausedGroups:    []GroupPause{},
			GroupLabel:      pol.GroupLabel,
			Blockers:        []Blocker{},
			FailedReboots: FailedReboots{
				Nodes:  append([]string{}, st.FailedReboots...),
				Max:    pol.MaxFailedReboots,
				Paused: sw.FailuresPaused,
				Reason: sw.FailuresReason,
			},
			Schedule:      schedule(set, now),
			RebootTimeout: publishedDuration(pol.RebootTimeout),
			SettleTime:    publishedDuration(pol.Settle.Time),
			Cycles:        cycles(st.CycleSeconds),
		},
	}
	for _, g := range sw.PausedGroups() {
		r.Fleet.PausedGroups = append(r.Fleet.PausedGroups, GroupPause{Group: g, Reason: sw.Groups[g]})
	}
	for _, b := range st.Blockers {
		r.Fleet.Blockers = append(r.Fleet.Blockers, Blocker{Name: b.Name, Reason: b.Reason, Since: b.Since.UTC()})
	}

	entries := make([]admission.Node, 0, len(nodes))
	for i := range nodes {
		row := node(&nodes[i], pol.GroupLabel, pol.StallPolicy, pol.RebootTimeout, now)
		e := admission.Of(&nodes[i], pol.GroupLabel, pol.StallPolicy)
		e.Policy, e.PolicyTied = ps.Of(&nodes[i], e.State.InCycle())
		row.Policy, row.PolicyTied = e.Policy, e.PolicyTied
		r.Nodes = append(r.Nodes, row)
		entries = append(entries, e)
	}
	r.Fleet.Policies = policyRows(ps, rps, r.Nodes, now)
	positions := queue(nodes, entries, pol.ControlPlaneOrder, sw, now)
	for i := range r.Nodes {
		r.Nodes[i].Queue = positions[r.Nodes[i].Name]
	}
	// Grouped by policy (the flags' first), then by name.
	sort.Slice(r.Nodes, func(i, j int) bool {
		if r.Nodes[i].Policy != r.Nodes[j].Policy {
			return r.Nodes[i].Policy < r.Nodes[j].Policy
		}
		return r.Nodes[i].Name < r.Nodes[j].Name
	})
	r.Fleet.Budgets = budgets(entries, set, ps)
	r.Fleet.Versions = versions(nodes, entries, pol.Canary, rec, now, progress{limits: poolLimits(r.Fleet.Budgets), cycles: st.CycleSeconds,
		settle: pol.Settle.Time, schedule: r.Fleet.Schedule, paused: sw.Paused || sw.FailuresPaused})
	r.Fleet.Problems = problems(r, now)
	return r
}

// WithLease adds the leader Lease read from the API server (nil: none) and the problem a dead one is.
func (r *Report) WithLease(l *Lease) {
	r.Fleet.Lease = l
	if l == nil && !r.Fleet.Published {
		p := Problem{Kind: "no-operator", What: "no operator in " + r.Namespace + ": no Lease, no status",
			Do: "docs/install.md; or is -n wrong?"}
		r.Fleet.Problems = append([]Problem{p}, r.Fleet.Problems...)
	}
	if l == nil || l.Live {
		return
	}
	since := "never renewed"
	if l.Renewed != nil {
		since = "last renewed " + l.Renewed.UTC().Format(time.RFC3339)
	}
	p := Problem{Kind: "no-leader", What: fmt.Sprintf("no operator is leading: the lease of %s expired (%s)", orDash(l.Holder), since),
		Do: "check the slipway-update-operator pods and their logs in " + r.Namespace}
	r.Fleet.Problems = append([]Problem{p}, r.Fleet.Problems...)
}

// problems lists what needs a person, most urgent first: the failure budget's pause and halted
// versions (a release went wrong), stalled nodes (with the stall's hint), undrainable nodes, a
// person's pause, nodes held longer than BlockedProblemAfter by something other than the plan, and
// nodes without an agent (one line for all of them).
func problems(r Report, now time.Time) []Problem {
	out := []Problem{}
	f := r.Fleet
	if f.FailedReboots.Paused {
		out = append(out, Problem{Kind: "failures-paused", What: orUnsaid(f.FailedReboots.Reason), Do: "look at the failed nodes, then resume --failures"})
	}
	for _, v := range f.Versions {
		if v.Canary == "halted" {
			out = append(out, Problem{Kind: "version-halted", What: fmt.Sprintf("%d failed reboots for %s", v.Failed, v.Version), Do: "look at its failed nodes, then resume --version " + v.Version})
		}
	}
	for _, n := range r.Nodes {
		if n.Stalled != "" {
			out = append(out, Problem{Kind: "stalled", Node: n.Name, What: "stalled: " + n.Stalled, Do: n.StallHint})
		}
	}
	out = append(out, overBudget(r)...)
	for _, n := range r.Nodes {
		if n.Undrainable != "" && n.State == protocol.NeedsReboot {
			why := n.Undrainable
			if at, rest, ok := strings.Cut(why, " "); ok && !parseTime(at).IsZero() {
				why = rest
			}
			out = append(out, Problem{Kind: "undrainable", Node: n.Name, What: "drain failed: " + why, Do: "fix the PodDisruptionBudget or pod that blocks it; it is retried by itself"})
		}
	}
	if p := f.Paused; p.Paused {
		out = append(out, Problem{Kind: "paused", What: "the fleet is paused: " + orUnsaid(p.Reason), Do: "resume when ready"})
	}
	// Held too long by something other than the plan: one line per reason, however many nodes share
	// it (a paused group of 500 nodes is one problem), with the longest wait.
	type held struct {
		nodes   []string
		longest time.Duration
	}
	byReason := map[string]*held{}
	var reasons []string
	for _, n := range r.Nodes {
		kind := admission.KindOf(n.BlockedBy)
		if n.WaitingSince == nil || n.BlockedBy == "" || kind.Quiet() || now.Sub(*n.WaitingSince) < BlockedProblemAfter {
			continue
		}
		h := byReason[n.BlockedBy]
		if h == nil {
			h = &held{}
			byReason[n.BlockedBy] = h
			reasons = append(reasons, n.BlockedBy)
		}
		h.nodes = append(h.nodes, n.Name)
		h.longest = max(h.longest, now.Sub(*n.WaitingSince))
	}
	for _, why := range reasons {
		h := byReason[why]
		p := Problem{Kind: "blocked", What: fmt.Sprintf("waiting %s: %s", duration.HumanDuration(h.longest), why),
			Do: "docs/troubleshooting.md: " + string(admission.KindOf(why))}
		if len(h.nodes) == 1 {
			p.Node = h.nodes[0]
		} else {
			p.What = fmt.Sprintf("%d nodes (%s) %s", len(h.nodes), nodes.Names(h.nodes, 3), p.What)
		}
		out = append(out, p)
	}
	var agentless []string
	for _, n := range r.Nodes {
		if n.NoAgent {
			agentless = append(agentless, n.Name)
		}
	}
	if len(agentless) > 0 {
		p := Problem{Kind: "no-agent", Node: agentless[0], What: "no update-agent has ever annotated it: it never asks to reboot",
			Do: "check the update-agent DaemonSet's nodeSelector and tolerations (docs/install.md)"}
		if len(agentless) > 1 {
			p.Node, p.What = "", fmt.Sprintf("%d nodes (%s) have no update-agent: they never ask to reboot", len(agentless), nodes.Names(agentless, 3))
		}
		out = append(out, p)
	}
	if p, ok := agentSkew(r); ok {
		out = append(out, p)
	}
	return out
}

// overBudget is a problem for each budget pool with more nodes unavailable than its limit (a node
// NotReady or cordoned by someone else counts, and can push a pool over): it names the node holding the
// extra slot -- one unavailable without a Slipway cycle first (the usual cause), else the one that
// entered its cycle last. Nothing new starts in that pool until it is back within its limit.
func overBudget(r Report) []Problem {
	var out []Problem
	for _, b := range r.Fleet.Budgets {
		if b.Limit == nil || b.Unavailable <= *b.Limit {
			continue
		}
		var extra *Node
		for i := range r.Nodes {
			n := &r.Nodes[i]
			if !n.Unavailable || !inPool(*n, b) {
				continue
			}
			switch {
			case extra == nil:
				extra = n
			case !n.State.InCycle() && extra.State.InCycle():
				extra = n
			case n.State.InCycle() == extra.State.InCycle() && n.Since != nil && (extra.Since == nil || n.Since.After(*extra.Since)):
				extra = n
			}
		}
		if extra == nil {
			continue
		}
		why, do := "the last in its cycle", "it finishes its cycle; nothing new starts meanwhile"
		switch {
		case !extra.State.InCycle() && !extra.Ready:
			why, do = "NotReady outside a cycle", "repair it; nothing new starts meanwhile"
		case !extra.State.InCycle():
			why, do = "cordoned outside a cycle", "uncordon it if it need not be down; nothing new starts meanwhile"
		}
		out = append(out, Problem{Kind: "over-budget", Node: extra.Name,
			What: fmt.Sprintf("over budget %s (%d unavailable, limit %d): it holds the extra slot, %s", budgetName(b), b.Unavailable, *b.Limit, why),
			Do:   do})
	}
	return out
}

// inPool reports whether n counts in budget pool b.
func inPool(n Node, b Budget) bool {
	switch b.Pool {
	case PoolControlPlane:
		return n.ControlPlane
	case PoolGroup:
		return n.Group == b.Group
	case PoolPolicy:
		return n.Policy == b.Policy
	}
	return true
}

// budgetName is a pool as the view names it: fleet, control-plane, group G, policy P.
func budgetName(b Budget) string {
	switch b.Pool {
	case PoolGroup:
		return "group " + orDash(b.Group)
	case PoolPolicy:
		return "policy " + b.Policy
	}
	return b.Pool
}

// release matches a release's version (vMAJOR.MINOR.PATCH, a pre-release or build after it).
var release = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+`)

// agentSkew is the problem of agents of another version than the leading operator's (both known):
// mixed versions are supported one release apart (the node protocol's versions), but a skew left
// after an upgrade means the agent DaemonSet did not roll.
func agentSkew(r Report) (Problem, bool) {
	op := r.Fleet.OperatorVersion
	if !release.MatchString(op) {
		return Problem{}, false // unknown, or a build of no release
	}
	byVersion := map[string][]string{}
	var versions []string
	for _, n := range r.Nodes {
		if !release.MatchString(n.AgentVersion) || n.AgentVersion == op {
			continue // none reported, or not a release's (a development build, a simulator)
		}
		if byVersion[n.AgentVersion] == nil {
			versions = append(versions, n.AgentVersion)
		}
		byVersion[n.AgentVersion] = append(byVersion[n.AgentVersion], n.Name)
	}
	if len(versions) == 0 {
		return Problem{}, false
	}
	sort.Strings(versions)
	var parts []string
	count := 0
	for _, v := range versions {
		parts = append(parts, fmt.Sprintf("%s on %s", v, nodes.Names(byVersion[v], 3)))
		count += len(byVersion[v])
	}
	return Problem{Kind: "agent-skew", What: fmt.Sprintf("%d node(s) run an update-agent other than the operator's %s: %s", count, op, strings.Join(parts, "; ")),
		Do: "roll the update-agent DaemonSet to the operator's version (docs/install.md, Upgrade)"}, true
}

// versions summarises entries per OS version the way admission decides on them: what the Nodes say
// now, and what the fleet record remembers.
func versions(nodes []corev1.Node, entries []admission.Node, c admission.Canary, rec fleetrecord.Record, now time.Time, p progress) []Version {
	proven := map[string]bool{} // version + " " + node UID
	for _, pr := range rec.Proofs {
		proven[pr.Version+" "+pr.UID] = true
	}
	stats := admission.VersionsOf(entries)
	for _, f := range rec.Failures { // a version only the record still knows (its nodes deleted) is shown too
		if f.Version != "" && stats[f.Version] == nil {
			stats[f.Version] = &admission.VersionStats{}
		}
	}
	out := []Version{}
	for v, s := range stats {
		resumed := rec.VersionResumedAt(v)
		full := admission.WithMemory(*s, v, rec)
		cs := admission.CanaryOf(full, c, resumed, now, 0)
		row := Version{Version: v, On: s.On, InCycle: s.InFlight, Asking: s.Asking, Failed: full.FailuresSince(resumed),
			Resumed: timePtr(resumed), Proven: len(full.Finished)}
		if x, ok := rec.LastResume(v); ok {
			row.ResumedBy, row.ResumeReason = x.By, x.Why
		}
		for i, e := range entries {
			if e.Version == v && !e.State.InCycle() && !proven[v+" "+string(nodes[i].UID)] {
				row.Unproven++
			}
		}
		if c.On() && cs.State != "off" {
			row.Canary, row.BakeEnd = cs.State, timePtr(cs.BakeEnd)
		}
		if left := leftOf(entries, v); len(left) > 0 && cs.State != "halted" {
			row.ETASeconds = p.eta(left, now)
		}
		out = append(out, row)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

func node(n *corev1.Node, groupLabel string, policy stall.SlotPolicy, timeout time.Duration, now time.Time) Node {
	// Hooks do not change the state a node is in (only what the operator does next), so the view
	// needs no hook names.
	f := protocol.Observe(n, protocol.Hooks{})
	state := protocol.Classify(f)
	a := n.Annotations
	last := parseTime(a[protocol.LastRebootTime])
	since := protocol.StageSince(state, n)
	waiting := parseTime(a[protocol.WaitingSince])
	switch state {
	case protocol.Idle:
		since = last
	case protocol.NeedsReboot:
		since = waiting
	}
	var stallsAt time.Time
	if f.Stalled == "" {
		// Hooks are not published: a node back and Ready in after-reboot reads as finishing now.
		_, stallsAt = stall.Of(state, f, n, now, timeout)
	}
	return Node{
		Name:          n.Name,
		OSVersion:     n.Labels[protocol.Version],
		AgentVersion:  a[protocol.AgentVersion],
		State:         state,
		Since:         timePtr(since),
		Group:         protocol.BudgetGroup(n, groupLabel),
		ControlPlane:  protocol.IsControlPlane(n),
		Paused:        f.Paused,
		Ready:         f.Ready,
		Unschedulable: f.Unschedulable,
		Unavailable:   admission.Counts(f, policy),
		BlockedBy:     a[protocol.BlockedBy],
		Stalled:       a[protocol.Stalled],
		DrainError:    a[protocol.DrainError],
		RebootError:   a[protocol.RebootError],
		LastReboot:    timePtr(last),
		WaitingSince:  timePtr(waiting),
		Undrainable:   a[protocol.Undrainable],
		StallHint:     stallHint(a[protocol.Stalled], n),
		StallsAt:      timePtr(stallsAt),
		NoAgent:       protocol.NoAgent(n, f, now),

		Channel:         n.Labels[protocol.Group],
		Server:          a[protocol.Server],
		WantChannel:     a[protocol.PoolGroup],
		WantServer:      a[protocol.PoolServer],
		UpdateConfError: a[protocol.UpdateConfError],
	}
}

func stallHint(reason string, n *corev1.Node) string {
	if reason == "" {
		return ""
	}
	return stall.Hint(reason, n)
}

// budgets are admission.Pools over the nodes under the policy the operator published (its
// --stall-policy included), so the view and the operator count alike (TestViewAndOperatorAgree): the
// fleet; the control plane when it has nodes; every group (limited only under
// --max-unavailable-per-group) when any node has one or a group label is configured. Limits are
// known only when the operator published them.
func budgets(entries []admission.Node, set settings, ps *policy.PoolSet) []Budget {
	var l admission.Limits
	maxes := map[admission.PoolKind]string{}
	limited := map[admission.PoolKind]bool{}
	groupLabel := ""
	if p := set.pol; p != nil {
		l = admission.Limits{Fleet: p.MaxUnavailable, PerGroup: p.MaxUnavailablePerGroup, ControlPlane: p.MaxUnavailableControlPlane}
		maxes[admission.PoolFleet], maxes[admission.PoolControlPlane] = p.Spec.MaxUnavailable, p.Spec.MaxUnavailableControlPlane
		limited[admission.PoolFleet], limited[admission.PoolControlPlane] = true, true
		if p.MaxUnavailablePerGroup != nil {
			maxes[admission.PoolGroup], limited[admission.PoolGroup] = p.Spec.MaxUnavailablePerGroup, true
		}
		groupLabel = p.GroupLabel
		l.Policies = ps.Limits()
	}
	anyGroup := groupLabel != ""
	for _, e := range entries {
		anyGroup = anyGroup || e.Group != ""
	}
	out := []Budget{}
	for _, p := range admission.Pools(entries, l) {
		if p.Kind == admission.PoolGroup && !anyGroup {
			continue
		}
		b := Budget{Pool: string(p.Kind), Group: p.Group, Policy: p.Policy, Nodes: p.Nodes, Unavailable: p.Used, Max: maxes[p.Kind]}
		if pool := ps.Get(p.Policy); p.Kind == admission.PoolPolicy && pool != nil && pool.Max != nil {
			b.Max = pool.Max.String()
		}
		if limited[p.Kind] || p.Kind == admission.PoolPolicy && p.Limited {
			limit := p.Limit
			b.Limit = &limit
		}
		out = append(out, b)
	}
	return out
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
