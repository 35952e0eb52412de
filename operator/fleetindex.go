package operator

import (
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/budget"
)

// entry is what admission needs of one node, derived once per change of that node (Controller.entry)
// instead of once per admission: at 5,000 nodes rescanning the fleet for every waiting node cost
// ~1.4 ms per admission and seconds of the single worker per change.
type entry struct {
	group  string
	cp     bool
	counts bool // against the budget: Controller.counts, the one place that decides it
	state  protocol.State
	paused bool
}

// pools is the list of budget pools a node is in besides the global one.
func (e entry) pools() []string {
	if e.cp {
		return []string{"group/" + e.group, controlPlanePool}
	}
	return []string{"group/" + e.group}
}

// busy: waiting to start (not paused) or in its cycle, for --control-plane-order.
func (e entry) busy() bool {
	return e.state == protocol.NeedsReboot && !e.paused || e.state.InCycle()
}

const controlPlanePool = "control-plane"

// fleetIndex keeps every node's entry and the counts admission reads, updated incrementally. It is
// written from informer handlers and the worker, hence the lock; gen changes whenever anything
// admission reads changes, so a plan computed for one gen stays right until it moves.
type fleetIndex struct {
	mu      sync.Mutex
	nodes   map[string]entry
	size    map[string]int // nodes per group
	cpSize  int
	used    map[string]int // pool key (budget.Global, "group/<g>", controlPlanePool) -> nodes counting
	busy    [2]int         // [workers, control plane] busy nodes
	waiting map[string]entry
	// reserved: nodes whose admission is being written; they count as in a cycle until it returns.
	reserved map[string]bool
	gen      uint64
}

func newFleetIndex() *fleetIndex {
	return &fleetIndex{nodes: map[string]entry{}, size: map[string]int{}, used: map[string]int{}, waiting: map[string]entry{}, reserved: map[string]bool{}}
}

// set stores name's entry (present false: the node is gone) and says whether it changed.
func (x *fleetIndex) set(name string, e entry, present bool) bool {
	old, had := x.nodes[name]
	if had == present && old == e {
		return false
	}
	if had {
		x.account(name, x.effective(name, old), -1)
	}
	if present {
		x.nodes[name] = e
		x.account(name, x.effective(name, e), +1)
	} else {
		delete(x.nodes, name)
	}
	x.gen++
	return true
}

// effective is the entry admission counts: a reserved node is in its cycle and counts.
func (x *fleetIndex) effective(name string, e entry) entry {
	if x.reserved[name] {
		e.counts, e.state = true, protocol.BeforeHooks
	}
	return e
}

// reserve holds name's place in every pool while its admission is written.
func (x *fleetIndex) reserve(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.setReserved(name, true)
}

// unreserve ends the hold; it says whether that changed the counts.
func (x *fleetIndex) unreserve(name string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.setReserved(name, false)
}

func (x *fleetIndex) setReserved(name string, on bool) bool {
	if x.reserved[name] == on {
		return false
	}
	e, had := x.nodes[name]
	if had {
		x.account(name, x.effective(name, e), -1)
	}
	if on {
		x.reserved[name] = true
	} else {
		delete(x.reserved, name)
	}
	if had {
		x.account(name, x.effective(name, e), +1)
	}
	x.gen++
	return true
}

func (x *fleetIndex) account(name string, e entry, d int) {
	x.size[e.group] += d
	if x.size[e.group] == 0 {
		delete(x.size, e.group)
	}
	if e.cp {
		x.cpSize += d
	}
	if e.counts {
		for _, k := range append([]string{budget.Global}, e.pools()...) {
			x.used[k] += d
		}
	}
	if e.busy() {
		x.busy[b2i(e.cp)] += d
	}
	if d > 0 && e.state == protocol.NeedsReboot {
		x.waiting[name] = e
	} else if d < 0 {
		delete(x.waiting, name)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// bump marks a change admission reads outside the index (the fleet switch, blockers' objects).
func (x *fleetIndex) bump() {
	x.mu.Lock()
	x.gen++
	x.mu.Unlock()
}

// snapshot is a consistent copy of what one admission plan reads.
type snapshot struct {
	gen                 uint64
	total               int
	size                map[string]int
	cpSize              int
	used                map[string]int
	busyWorkers, busyCP bool
	waiting             map[string]entry
}

func (x *fleetIndex) snapshot() snapshot {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := snapshot{gen: x.gen, total: len(x.nodes), cpSize: x.cpSize, busyWorkers: x.busy[0] > 0, busyCP: x.busy[1] > 0,
		size: make(map[string]int, len(x.size)), used: make(map[string]int, len(x.used)), waiting: make(map[string]entry, len(x.waiting))}
	for k, v := range x.size {
		s.size[k] = v
	}
	for k, v := range x.used {
		s.used[k] = v
	}
	for k, v := range x.waiting {
		s.waiting[k] = v
	}
	return s
}

func (x *fleetIndex) generation() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.gen
}

// waitingNames are the nodes asking for a reboot.
func (x *fleetIndex) waitingNames() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]string, 0, len(x.waiting))
	for n := range x.waiting {
		out = append(out, n)
	}
	return out
}

// entry derives a node's index entry.
func (c *Controller) entry(n *corev1.Node) entry {
	f := protocol.Observe(n, c.cfg.Hooks)
	return entry{group: c.group(n), cp: isControlPlane(n), counts: c.counts(f), state: protocol.Classify(f), paused: f.Paused}
}

// reindex brings name's entry up to date with the newest view of the node (the informer's store or
// our own newer write) and, when it changed, gives waiting nodes another look. Always from the
// newest view, under the index lock: a handler holding an older object cannot put back stale counts.
func (c *Controller) reindex(name string) {
	c.index.mu.Lock()
	n, err := c.node(name)
	var changed bool
	if err != nil {
		changed = c.index.set(name, entry{}, false)
	} else {
		changed = c.index.set(name, c.entry(n), true)
	}
	c.index.mu.Unlock()
	if changed {
		c.queue.Add(waitingKey)
	}
}

// unreserve ends name's admission hold; if that freed budget (the PATCH failed), waiting nodes get
// another look.
func (c *Controller) unreserve(name string) {
	if c.index.unreserve(name) {
		c.queue.Add(waitingKey)
	}
}

// wrote records our own write: the overlay (so we never act on an older view) and the index.
func (c *Controller) wrote(out *corev1.Node) {
	c.overlay.Wrote(out)
	c.reindex(out.Name)
}
