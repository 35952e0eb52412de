package blocker

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MinReadyNodes is a minimum number of available nodes: a count, or a percentage of all nodes.
type MinReadyNodes struct {
	n       int
	percent bool
	raw     string
}

// ParseMinReadyNodes reads "3" or "60%". Zero is allowed and never blocks.
func ParseMinReadyNodes(s string) (MinReadyNodes, error) {
	s = strings.TrimSpace(s)
	pct := strings.HasSuffix(s, "%")
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || n < 0 || (pct && n > 100) {
		return MinReadyNodes{}, fmt.Errorf("min-ready-nodes %q: want a count like 3 or a percentage of all nodes like 60%%", s)
	}
	return MinReadyNodes{n: n, percent: pct, raw: s}, nil
}

// Of is the minimum for a fleet of total nodes. Percentages round up: a floor of 50% of 5 nodes
// keeps 3, never 2.
func (m MinReadyNodes) Of(total int) int {
	if !m.percent {
		return m.n
	}
	return (total*m.n + 99) / 100
}

func (m MinReadyNodes) String() string { return m.raw }

// NodeList returns every Node the controller sees (its lister, with its own latest writes applied).
type NodeList func() ([]*corev1.Node, error)

// MinReady blocks a node when admitting it would leave fewer than the minimum of available nodes.
// After an admission the available nodes are the others that are available, so a node waits while
// fewer than the minimum of the other nodes are available, whether it is available itself or not.
type MinReady struct {
	floor       MinReadyNodes
	nodes       NodeList
	unavailable func(*corev1.Node) bool
}

// NewMinReady builds the blocker. unavailable says whether a node is out of service; nil means
// NotReady, cordoned or being deleted. The controller should pass its own notion, which also counts
// nodes it admitted that are still Ready and schedulable (in the before-reboot hooks): otherwise two
// admissions in a row would both see the first node as available.
func NewMinReady(floor MinReadyNodes, nodes NodeList, unavailable func(*corev1.Node) bool) (*MinReady, error) {
	if nodes == nil {
		return nil, fmt.Errorf("min-ready-nodes blocker: no node list")
	}
	if unavailable == nil {
		unavailable = NotAvailable
	}
	return &MinReady{floor: floor, nodes: nodes, unavailable: unavailable}, nil
}

// NotAvailable is the default notion of an out-of-service node: not Ready, cordoned, or being deleted.
func NotAvailable(n *corev1.Node) bool {
	if n.Spec.Unschedulable || n.DeletionTimestamp != nil {
		return true
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return true
}

// Name is NameMinReadyNodes.
func (m *MinReady) Name() string { return NameMinReadyNodes }

// FleetWide is false: the answer leaves out the node asking (see MinReady).
func (m *MinReady) FleetWide() bool { return false }

// Check implements Blocker.
func (m *MinReady) Check(_ context.Context, node *corev1.Node) (bool, string) {
	if node == nil {
		return true, "check failed: no node given"
	}
	all, err := m.nodes()
	if err != nil {
		return true, shorten("check failed: listing nodes: " + err.Error())
	}
	floor := m.floor.Of(len(all))
	others := 0
	for _, n := range all {
		if n.Name != node.Name && !m.unavailable(n) {
			others++
		}
	}
	if others >= floor {
		return false, ""
	}
	return true, fmt.Sprintf("admitting %s would leave %d of %d nodes Ready and schedulable, fewer than min-ready-nodes=%s (%d)",
		node.Name, others, len(all), m.floor, floor)
}
