package status

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/budget"
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
	Published     bool          `json:"published"`
	Leader        string        `json:"leader"`
	Paused        Pause         `json:"paused"`
	PausedGroups  []GroupPause  `json:"pausedGroups"`
	GroupLabel    string        `json:"groupLabel"`
	Budgets       []Budget      `json:"budgets"`
	Schedule      Schedule      `json:"schedule"`
	Blockers      []Blocker     `json:"blockers"`
	FailedReboots FailedReboots `json:"failedReboots"`
	// Versions: every OS version a node runs or asks for, newest name last.
	Versions []Version `json:"versions"`
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
)

// Budget is one pool of the budget: how many of its nodes are unavailable, and how many may be.
type Budget struct {
	Pool        string `json:"pool"`
	Group       string `json:"group"`
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
	Resumed *time.Time `json:"resumed"` // when a person last ran resume --version for it
}

// Node is one node's row.
type Node struct {
	Name          string         `json:"name"`
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
}

// Build derives the report from the Nodes and the slipway-fleet ConfigMap (nil when there is none) at
// the instant now. It never fails: what the objects do not say is reported as unknown.
func Build(nodes []corev1.Node, cm *corev1.ConfigMap, namespace string, now time.Time) Report {
	st, published := fleetswitch.ReadStatus(cm)
	sw := fleetswitch.Read(cm)
	r := Report{
		APIVersion: APIVersion,
		Time:       now.UTC(),
		Namespace:  namespace,
		Nodes:      []Node{},
		Fleet: Fleet{
			Published:    published,
			Leader:       st.Leader,
			Paused:       Pause{Paused: sw.Paused, Reason: sw.Reason, By: sw.By, At: timePtr(sw.At)},
			PausedGroups: []GroupPause{},
			GroupLabel:   st.GroupLabel,
			Blockers:     []Blocker{},
			FailedReboots: FailedReboots{
				Nodes:  append([]string{}, st.FailedReboots...),
				Max:    st.MaxFailedReboots,
				Paused: sw.FailuresPaused,
				Reason: sw.FailuresReason,
			},
			Schedule: schedule(st, published, now),
		},
	}
	for _, g := range sw.PausedGroups() {
		r.Fleet.PausedGroups = append(r.Fleet.PausedGroups, GroupPause{Group: g, Reason: sw.Groups[g]})
	}
	for _, b := range st.Blockers {
		r.Fleet.Blockers = append(r.Fleet.Blockers, Blocker{Name: b.Name, Reason: b.Reason, Since: b.Since.UTC()})
	}

	policy := stall.Policy(st.StallPolicy)
	entries := make([]admission.Node, 0, len(nodes))
	for i := range nodes {
		r.Nodes = append(r.Nodes, node(&nodes[i], st.GroupLabel, policy))
		entries = append(entries, admission.Of(&nodes[i], st.GroupLabel, policy))
	}
	sort.Slice(r.Nodes, func(i, j int) bool { return r.Nodes[i].Name < r.Nodes[j].Name })
	r.Fleet.Budgets = budgets(entries, st, published)
	r.Fleet.Versions = versions(entries, st, sw, now)
	return r
}

// versions summarises entries per OS version the way admission decides on them.
func versions(entries []admission.Node, st fleetswitch.Status, sw fleetswitch.Switch, now time.Time) []Version {
	bake, _ := time.ParseDuration(st.CanaryBake)
	c := admission.Canary{Nodes: st.CanaryNodes, Bake: bake, MaxFailed: st.MaxFailedPerVersion}
	out := []Version{}
	for v, s := range admission.VersionsOf(entries) {
		resumed := sw.VersionResumedAt(v)
		cs := admission.CanaryOf(*s, c, resumed, now, 0)
		row := Version{Version: v, On: s.On, InCycle: s.InFlight, Asking: s.Asking, Failed: s.FailuresSince(resumed), Resumed: timePtr(resumed)}
		if c.On() && cs.State != "off" {
			row.Canary, row.BakeEnd = cs.State, timePtr(cs.BakeEnd)
		}
		out = append(out, row)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

func node(n *corev1.Node, groupLabel string, policy stall.Policy) Node {
	// Hooks do not change the state a node is in (only what the operator does next), so the view
	// needs no hook names.
	f := protocol.Observe(n, protocol.Hooks{})
	state := protocol.Classify(f)
	a := n.Annotations
	last := parseTime(a[protocol.LastRebootTime])
	since := protocol.StageSince(state, n)
	if state == protocol.Idle {
		since = last
	}
	return Node{
		Name:          n.Name,
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
	}
}

// budgets are admission.Pools over the nodes under the configuration the operator published (its
// --stall-policy included), so the view and the operator count alike (TestViewAndOperatorAgree): the
// fleet; the control plane when it has nodes; every group (limited only under
// --max-unavailable-per-group) when any node has one or a group label is configured. Limits are
// known only when the operator published them.
func budgets(entries []admission.Node, st fleetswitch.Status, published bool) []Budget {
	maxes := map[admission.PoolKind]string{admission.PoolFleet: st.MaxUnavailable, admission.PoolGroup: st.MaxUnavailablePerGroup,
		admission.PoolControlPlane: st.MaxUnavailableControlPlane}
	parsed := map[admission.PoolKind]*budget.Max{}
	for k := range maxes {
		if !published {
			maxes[k] = ""
		}
		if m, err := budget.ParseMax(maxes[k]); err == nil {
			parsed[k] = &m
		}
	}
	var l admission.Limits
	if m := parsed[admission.PoolFleet]; m != nil {
		l.Fleet = *m
	}
	if m := parsed[admission.PoolControlPlane]; m != nil {
		l.ControlPlane = *m
	}
	l.PerGroup = parsed[admission.PoolGroup]
	anyGroup := st.GroupLabel != ""
	for _, e := range entries {
		anyGroup = anyGroup || e.Group != ""
	}
	out := []Budget{}
	for _, p := range admission.Pools(entries, l) {
		if p.Kind == admission.PoolGroup && !anyGroup {
			continue
		}
		b := Budget{Pool: string(p.Kind), Group: p.Group, Nodes: p.Nodes, Unavailable: p.Used, Max: maxes[p.Kind]}
		if parsed[p.Kind] != nil {
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
