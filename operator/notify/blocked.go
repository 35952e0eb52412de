package notify

import (
	"fmt"
	"sync"
	"time"

	"github.com/slipway-dev/slipway/operator/admission"
)

// BlockedRule turns "this node is still waiting" into one `blocked` notification per episode, after
// a node has been held for `after` (--notify-blocked-after) by something other than the plan.
//
// The controller calls Blocked(node, why) on every sync of a node that waits to start its cycle, with
// the node's blocked-by value ("<kind>: <detail>", e.g. "alerts: KubeNodeNotReady firing"), and
// Unblocked(node) when it was admitted, no longer needs a reboot, or was deleted. It needs no clock of
// its own and need not call at any rate: the rule starts a timer when an episode begins and sends when
// it fires (or on a later Blocked call, whichever comes first).
//
//   - An episode of a node begins with the first Blocked call whose kind is not quiet (quiet:
//     DefaultQuietKinds — budget, window, order — the plan working) and ends with Unblocked, a quiet
//     kind, or a different kind (which begins a new episode). Its detail may change without ending it
//     (a second alert firing). So a node that waited for its window all night and then meets a firing
//     alert is reported `after` past the alert, not at once.
//   - Once per episode: a node is reported at most once however long it waits.
//   - Once per kind, fleet-wide: while one node's `blocked` message for a kind stands (that node or
//     another is still held by the same kind), other nodes held by the same kind are not reported
//     separately; the message counts them ("and 4 other nodes held by alerts"). A firing alert or a
//     fleet pause holds every waiting node at once and makes one message, not one per node. When no
//     node is held by that kind any more, the next episode of it is reported again.
//   - Episodes live in memory: after a restart or a leader change, an ongoing one counts from the new
//     leader's first sync (so it may be reported again, `after` later).
type BlockedRule struct {
	n     Notifier
	after time.Duration
	quiet map[string]bool

	// now and afterFunc are time.Now and time.AfterFunc; a test replaces them to run the rule on a
	// clock of its own.
	now       func() time.Time
	afterFunc func(time.Duration, func()) stopper

	mu    sync.Mutex
	nodes map[string]*episode
	told  map[string]bool // kinds with a message standing
}

type episode struct {
	kind, why string
	start     time.Time
	timer     stopper
	told      bool
}

// stopper is what the rule needs of a timer (*time.Timer has it).
type stopper interface{ Stop() bool }

func afterFunc(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }

// NewBlockedRule sends its `blocked` Events to n. after <= 0 turns it off.
func NewBlockedRule(n Notifier, after time.Duration, quietKinds []string) *BlockedRule {
	r := &BlockedRule{n: n, after: after, quiet: map[string]bool{}, now: time.Now, afterFunc: afterFunc, nodes: map[string]*episode{}, told: map[string]bool{}}
	for _, k := range quietKinds {
		r.quiet[k] = true
	}
	return r
}

// BlockedKind is the kind of a blocked-by value: the text before its first colon (admission.KindOf).
func BlockedKind(why string) string { return string(admission.KindOf(why)) }

// Blocked reports that node waits, held by why.
func (r *BlockedRule) Blocked(node, why string) {
	if r == nil || r.after <= 0 {
		return
	}
	kind := BlockedKind(why)
	if why == "" || r.quiet[kind] {
		r.Unblocked(node)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ep := r.nodes[node]
	if ep != nil && ep.kind != kind {
		r.end(node, ep)
		ep = nil
	}
	if ep == nil {
		ep = &episode{kind: kind, start: r.now()}
		r.nodes[node] = ep
		ep.timer = r.afterFunc(r.after, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.nodes[node] == ep {
				r.check(node, ep)
			}
		})
	}
	ep.why = why
	r.check(node, ep)
}

// Unblocked reports that node no longer waits.
func (r *BlockedRule) Unblocked(node string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ep := r.nodes[node]; ep != nil {
		r.end(node, ep)
	}
}

// check sends the episode's message when it is due and no other stands for its kind. Called with mu.
func (r *BlockedRule) check(node string, ep *episode) {
	waited := r.now().Sub(ep.start)
	if ep.told || waited < r.after {
		return
	}
	ep.told = true
	if r.told[ep.kind] {
		return // another node's message for this kind stands
	}
	r.told[ep.kind] = true
	others := 0
	for n, e := range r.nodes {
		if n != node && e.kind == ep.kind {
			others++
		}
	}
	detail := ""
	switch others {
	case 0:
	case 1:
		detail = fmt.Sprintf("and 1 other node held by %s", ep.kind)
	default:
		detail = fmt.Sprintf("and %d other nodes held by %s", others, ep.kind)
	}
	r.n.Notify(Event{Kind: KindBlocked, Node: node, Reason: ep.why, Detail: detail, Took: waited})
}

// end forgets node's episode. Called with mu.
func (r *BlockedRule) end(node string, ep *episode) {
	ep.timer.Stop()
	delete(r.nodes, node)
	for _, e := range r.nodes {
		if e.kind == ep.kind {
			return
		}
	}
	delete(r.told, ep.kind)
}

// stop stops every timer (the Sender's Run ended).
func (r *BlockedRule) stop() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ep := range r.nodes {
		ep.timer.Stop()
	}
}
