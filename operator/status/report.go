package status

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/fleet"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/budget"
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

// Pools of Budget.Pool.
const (
	PoolFleet        = "fleet"
	PoolControlPlane = "control-plane"
	PoolGroup        = "group"
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
	st, published := fleet.ReadStatus(cm)
	sw := fleet.Read(cm)
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
				Nodes: append([]string{}, st.FailedReboots...),
				Max:   st.MaxFailedReboots,
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

	for i := range nodes {
		r.Nodes = append(r.Nodes, node(&nodes[i], st.GroupLabel))
	}
	sort.Slice(r.Nodes, func(i, j int) bool { return r.Nodes[i].Name < r.Nodes[j].Name })
	r.Fleet.Budgets = budgets(r.Nodes, st, published)
	return r
}

func node(n *corev1.Node, groupLabel string) Node {
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
		Unavailable:   f.Unavailable(),
		BlockedBy:     a[protocol.BlockedBy],
		Stalled:       a[protocol.Stalled],
		DrainError:    a[protocol.DrainError],
		RebootError:   a[protocol.RebootError],
		LastReboot:    timePtr(last),
	}
}

// budgets counts the pools as the operator's admission does: the fleet; the control plane when it has
// nodes; every group (limited only under --max-unavailable-per-group) when any node has one or a
// group label is configured.
func budgets(nodes []Node, st fleet.Status, published bool) []Budget {
	fleetPool := Budget{Pool: PoolFleet, Max: st.MaxUnavailable}
	cp := Budget{Pool: PoolControlPlane, Max: st.MaxUnavailableControlPlane}
	groups := map[string]*Budget{}
	anyGroup := st.GroupLabel != ""
	for _, n := range nodes {
		in := []*Budget{&fleetPool}
		if n.ControlPlane {
			in = append(in, &cp)
		}
		g := groups[n.Group]
		if g == nil {
			g = &Budget{Pool: PoolGroup, Group: n.Group, Max: st.MaxUnavailablePerGroup}
			groups[n.Group] = g
		}
		anyGroup = anyGroup || n.Group != ""
		in = append(in, g)
		for _, b := range in {
			b.Nodes++
			if n.Unavailable {
				b.Unavailable++
			}
		}
	}
	out := []Budget{fleetPool}
	if cp.Nodes > 0 {
		out = append(out, cp)
	}
	if anyGroup {
		names := make([]string, 0, len(groups))
		for g := range groups {
			names = append(names, g)
		}
		sort.Strings(names)
		for _, g := range names {
			out = append(out, *groups[g])
		}
	}
	for i := range out {
		if !published {
			out[i].Max = ""
		}
		if m, err := budget.ParseMax(out[i].Max); err == nil {
			l := m.Limit(out[i].Nodes)
			out[i].Limit = &l
		}
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
