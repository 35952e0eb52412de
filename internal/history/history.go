// Package history is the fleet's record of reboot cycles that ended: for each, the node, the OS
// version, when it asked, was admitted, started draining, was granted its reboot and ended, and how
// (finished, failed, undrainable, aborted, replaced). The operator keeps it in ConfigMap
// slipway-history beside the fleet record, so "what happened last night" has an answer after Events
// expired and whatever happened to the Nodes since; kubectl slipway history reads it, as a table or a
// timeline (svg.go). Pure: no Kubernetes, no clock of its own.
package history

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// ConfigMapName and Key: where the operator stores it, in its namespace.
const (
	ConfigMapName = "slipway-history"
	Key           = "cycles"
)

// MaxCycles bounds the record: the newest cycles are kept. Each is ~200 bytes of JSON, so the
// ConfigMap stays under half of the API server's 1 MiB; at 5,000 nodes that is the last ~2,000
// cycles of the fleet (a night's roll-out of 2,000 nodes, or the last few days of a smaller fleet).
const MaxCycles = 2000

// MaxBytes bounds the record's JSON as well: a cycle's texts (node names of 253 bytes, a drain error
// as its why) can make 2,000 cycles larger than the ConfigMap may be (1 MiB). The newest cycles that
// fit are kept, the encoded record stays under half of it.
const MaxBytes = 512 << 10

// Results of a cycle: the operator's slipway_operator_cycles_total results.
const (
	Finished    = "finished"
	Failed      = "failed"
	Undrainable = "undrainable"
	Aborted     = "aborted"
	Replaced    = "replaced"
)

// Cycle is one reboot cycle that ended. Times the operator did not see (a cycle admitted by an earlier
// leader, a restart in between) are zero.
type Cycle struct {
	Node    string `json:"node"`
	UID     string `json:"uid,omitempty"`
	Version string `json:"version,omitempty"` // the OS version it rebooted for
	Policy  string `json:"policy,omitempty"`  // its RebootPolicy ("" the flags')
	// Asked: it was first seen needing a reboot; Admitted: its cycle started (cycle-started);
	// Drained: its drain started; Granted: reboot-ok; Ended: the cycle ended, as Result says.
	Asked    time.Time `json:"asked,omitzero"`
	Admitted time.Time `json:"admitted,omitzero"`
	Drained  time.Time `json:"drained,omitzero"`
	Granted  time.Time `json:"granted,omitzero"`
	Ended    time.Time `json:"ended"`
	Result   string    `json:"result"`
	Why      string    `json:"why,omitempty"` // why it did not finish
}

// Took is how long the cycle ran, from its admission (0 when that is not known).
func (c Cycle) Took() time.Duration {
	if c.Admitted.IsZero() || c.Ended.Before(c.Admitted) {
		return 0
	}
	return c.Ended.Sub(c.Admitted)
}

// Start is the earliest time the cycle knows of.
func (c Cycle) Start() time.Time {
	for _, t := range []time.Time{c.Asked, c.Admitted, c.Drained, c.Granted} {
		if !t.IsZero() {
			return t
		}
	}
	return c.Ended
}

// Record is the cycles, oldest first.
type Record struct {
	Cycles []Cycle `json:"cycles"`
}

// Same reports whether a and b are one cycle of one machine (a cycle is reported once; a leader
// change may report it twice).
func Same(a, b Cycle) bool {
	return a.Node == b.Node && a.UID == b.UID && a.Admitted.Equal(b.Admitted) && a.Ended.Equal(b.Ended)
}

// Add records c unless it is there; it reports whether the record changed.
func (r *Record) Add(c Cycle) bool {
	if c.Node == "" || c.Ended.IsZero() {
		return false
	}
	for _, x := range r.Cycles {
		if Same(x, c) {
			return false
		}
	}
	r.Cycles = append(r.Cycles, c)
	r.sort()
	return true
}

// Merge adds every cycle of o; it reports whether the record changed.
func (r *Record) Merge(o Record) bool {
	changed := false
	for _, c := range o.Cycles {
		changed = r.Add(c) || changed
	}
	return changed
}

func (r *Record) sort() {
	sort.SliceStable(r.Cycles, func(i, j int) bool {
		if !r.Cycles[i].Ended.Equal(r.Cycles[j].Ended) {
			return r.Cycles[i].Ended.Before(r.Cycles[j].Ended)
		}
		return r.Cycles[i].Node < r.Cycles[j].Node
	})
}

// Bound keeps the newest MaxCycles, and of those the newest whose JSON fits in MaxBytes.
func (r *Record) Bound() {
	if len(r.Cycles) > MaxCycles {
		r.Cycles = slices.Clone(r.Cycles[len(r.Cycles)-MaxCycles:])
	}
	size := len(`{"cycles":[]}`)
	for i := len(r.Cycles) - 1; i >= 0; i-- {
		b, _ := json.Marshal(r.Cycles[i])
		if size += len(b) + 1; size > MaxBytes { // +1: the comma
			r.Cycles = slices.Clone(r.Cycles[i+1:])
			return
		}
	}
}

// Encode writes the record bounded, in a stable form.
func (r Record) Encode() string {
	r.Cycles = slices.Clone(r.Cycles)
	r.Bound()
	b, _ := json.Marshal(r)
	return string(b)
}

// Decode reads a record; "" is the empty one. Fields it does not know (a newer operator's) are
// skipped, so an operator rolled back still reads and extends it; anything else unreadable is an error
// (the caller keeps its own and does not overwrite what it cannot read).
func Decode(s string) (Record, error) {
	var r Record
	if strings.TrimSpace(s) == "" {
		return r, nil
	}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Record{}, fmt.Errorf("history: %w", err)
	}
	for _, c := range r.Cycles {
		if c.Node == "" || c.Ended.IsZero() {
			return Record{}, fmt.Errorf("history: a cycle without node or end (%+v)", c)
		}
	}
	r.sort()
	return r, nil
}

// Select is the cycles that ended at or after since (zero: all) of node ("" every node), oldest first.
func (r Record) Select(node string, since time.Time) []Cycle {
	var out []Cycle
	for _, c := range r.Cycles {
		if (node == "" || c.Node == node) && !c.Ended.Before(since) {
			out = append(out, c)
		}
	}
	return out
}
