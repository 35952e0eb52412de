package admission

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// Index keeps every node's entry and the counts admission reads, updated incrementally: at 5,000
// nodes rescanning the fleet for every waiting node cost ~1.4 ms per admission and seconds of a worker
// per change. It is written from informer handlers and workers, hence its lock; Gen changes whenever
// anything admission reads changes, so a plan computed for one Gen stays right until it moves.
type Index struct {
	mu    sync.Mutex
	nodes map[string]Node
	size  map[string]int // pool key -> nodes in it
	used  map[string]int // pool key -> nodes counting against it (or settling)
	// settling: nodes holding their slots after their cycle (Node.Settling).
	settling map[string]Node
	busy     [2]int // [workers, control plane] busy nodes (Node.Busy)
	waiting  map[string]Node
	// since: when each waiting node was first seen asking; kept while it is in its cycle, for the
	// need-to-grant metric (EndWait). Admission order among equals is longest waiting first.
	since map[string]time.Time
	// reserved: nodes held in their cycle whatever their entry says, while an admission (or a step
	// that frees a slot) is being written; a count, since holds may nest.
	reserved map[string]int
	// reservedAs: the policy an admission being written decided a node under; while reserved, it
	// counts there whatever its labels say meanwhile (its pin lands with the admission's PATCH).
	reservedAs map[string]string
	gen        uint64
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{nodes: map[string]Node{}, size: map[string]int{}, used: map[string]int{}, waiting: map[string]Node{},
		settling: map[string]Node{}, since: map[string]time.Time{}, reserved: map[string]int{}, reservedAs: map[string]string{}}
}

// Update brings name's entry up to date: get returns the node's entry now (ok false: it is gone). get
// runs under the index's lock, so an informer handler holding an older object cannot put back stale
// counts after a newer write: each Update reads the newest view. now stamps a node's first ask. It
// reports whether anything admission reads changed.
func (x *Index) Update(name string, now time.Time, get func() (Node, bool)) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, present := get()
	return x.set(name, e, present, now)
}

func (x *Index) set(name string, e Node, present bool, now time.Time) bool {
	if present && e.Waiting() {
		if _, ok := x.since[name]; !ok {
			since := now
			if w := e.WaitingSince; !w.IsZero() && w.Before(now) {
				since = w // held before, by an earlier leader: its place in the queue stays
			}
			x.since[name] = since
		}
	} else if !present || !e.State.InCycle() {
		delete(x.since, name) // no longer asking: a later ask waits from then
	}
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
func (x *Index) effective(name string, e Node) Node {
	if x.reserved[name] > 0 {
		e.Counts, e.State = true, protocol.BeforeHooks
		if p, ok := x.reservedAs[name]; ok {
			e.Policy, e.PolicyTied = p, ""
		}
	}
	return e
}

// Reserve holds name in its cycle in every pool until the returned release is called; release
// reports whether that changed the counts (a slot was freed: waiting nodes deserve another look).
func (x *Index) Reserve(name string) (release func() bool) {
	return x.reserve(name, nil)
}

// ReserveAs is Reserve for a node admitted under policy: while reserved it counts against that
// policy's budget, even if a relabel moves its entry to another before its pin is written.
func (x *Index) ReserveAs(name, policy string) (release func() bool) {
	return x.reserve(name, &policy)
}

func (x *Index) reserve(name string, policy *string) (release func() bool) {
	x.mu.Lock()
	x.setReserved(name, +1, policy)
	x.mu.Unlock()
	var once sync.Once
	return func() bool {
		changed := false
		once.Do(func() {
			x.mu.Lock()
			defer x.mu.Unlock()
			changed = x.setReserved(name, -1, nil)
		})
		return changed
	}
}

func (x *Index) setReserved(name string, d int, policy *string) bool {
	was := x.reserved[name] > 0
	e, had := x.nodes[name]
	if had {
		x.account(name, x.effective(name, e), -1)
	}
	if policy != nil {
		x.reservedAs[name] = *policy
	}
	if x.reserved[name] += d; x.reserved[name] <= 0 {
		delete(x.reserved, name)
		delete(x.reservedAs, name)
	}
	if had {
		x.account(name, x.effective(name, e), +1)
	}
	if was == (x.reserved[name] > 0) {
		return false
	}
	x.gen++
	return true
}

func (x *Index) account(name string, e Node, d int) {
	for _, k := range e.PoolKeys() {
		x.size[k] += d
		if x.size[k] == 0 {
			delete(x.size, k)
		}
		if e.Occupies() {
			if x.used[k] += d; x.used[k] == 0 {
				delete(x.used, k) // zero counts go: a node hopping groups leaves no key behind
			}
		}
	}
	if e.Busy() {
		x.busy[b2i(e.ControlPlane)] += d
	}
	if d > 0 && e.Waiting() {
		x.waiting[name] = e
	} else if d < 0 {
		delete(x.waiting, name)
	}
	if d > 0 && e.Settling != "" {
		x.settling[name] = e
	} else if d < 0 {
		delete(x.settling, name)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Bump marks a change admission reads outside the index (the pause switch, blockers' objects, a
// self-pause decided): plans computed before it are stale.
func (x *Index) Bump() {
	x.mu.Lock()
	x.gen++
	x.mu.Unlock()
}

// EndWait ends name's wait for admission (granted, aborted, gone) and returns when it began.
func (x *Index) EndWait(name string) (time.Time, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	t, ok := x.since[name]
	delete(x.since, name)
	return t, ok
}

// Snapshot is a consistent copy of what one admission plan reads.
type Snapshot struct {
	Gen                 uint64
	Total               int
	Size, Used          map[string]int // by pool key
	BusyWorkers, BusyCP bool
	Waiting             map[string]Node
	Since               map[string]time.Time // of the waiting nodes
	Settling            map[string]Node      // nodes holding their slots after their cycle
}

// Pools are the snapshot's pools under l (the same as Pools over every entry, reservations counted).
func (s Snapshot) Pools(l Limits) []BudgetPool { return poolsOf(s.Total, s.Size, s.Used, l) }

// Snapshot copies the index.
func (x *Index) Snapshot() Snapshot {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := Snapshot{Gen: x.gen, Total: len(x.nodes), BusyWorkers: x.busy[0] > 0, BusyCP: x.busy[1] > 0,
		Size: make(map[string]int, len(x.size)), Used: make(map[string]int, len(x.used)),
		Waiting: make(map[string]Node, len(x.waiting)), Since: make(map[string]time.Time, len(x.waiting)),
		Settling: make(map[string]Node, len(x.settling))}
	for k, v := range x.settling {
		s.Settling[k] = v
	}
	for k, v := range x.size {
		s.Size[k] = v
	}
	for k, v := range x.used {
		s.Used[k] = v
	}
	for k, v := range x.waiting {
		s.Waiting[k] = v
		if t, ok := x.since[k]; ok {
			s.Since[k] = t
		}
	}
	return s
}

// Quiet reports whether no node is in its cycle, asks to start one or is being admitted: a roll-out
// is over (nodes still settling may hold their slots; no cycle follows them unless one asks).
func (x *Index) Quiet() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.busy[0] == 0 && x.busy[1] == 0 && len(x.waiting) == 0 && len(x.reserved) == 0
}

// Gen is the index's generation.
func (x *Index) Gen() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.gen
}

// WaitingNames are the nodes asking for a reboot.
func (x *Index) WaitingNames() []string { return x.names(x.waiting) }

// SettlingNames are the nodes holding their slots after their cycle.
func (x *Index) SettlingNames() []string { return x.names(x.settling) }

// names copies the keys of one of the index's maps under its lock.
func (x *Index) names(m map[string]Node) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Collect(maps.Keys(m))
}

// Entries copies every node's entry as admission counts it (reservations applied), for Pools.
func (x *Index) Entries() []Node {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]Node, 0, len(x.nodes))
	for name, e := range x.nodes {
		out = append(out, x.effective(name, e))
	}
	return out
}

// Policy is the RebootPolicy node name counts in as admission counts it ("" the flags'; a reservation's
// while its admission is being written; "" for a tie, which counts in none), and whether the index
// holds the node at all.
func (x *Index) Policy(name string) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.nodes[name]
	if !ok {
		return "", false
	}
	if e = x.effective(name, e); e.PolicyTied != "" {
		return "", true
	}
	return e.Policy, true
}

// EntriesByName is every node's entry as admission counts it, by node name.
func (x *Index) EntriesByName() map[string]Node {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make(map[string]Node, len(x.nodes))
	for name, e := range x.nodes {
		out[name] = x.effective(name, e)
	}
	return out
}
