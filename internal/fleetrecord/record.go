// Package fleetrecord is the fleet's memory: what the operator has learned about the fleet as a whole
// (failed reboots, the OS versions they halt, canary proof, and who resumed what and when), kept in one
// object of its own so that it outlives every Node.
//
// Why not on the Nodes: cluster-autoscaler deletes the empty, cordoned canary Slipway just drained,
// MachineHealthChecks and cloud auto-repair replace unready Nodes, and a person may remove a mark. A
// halt derived from marks on the failed Node dies with it. Here a failure is forgotten only when a
// person resumes (Resume), and the record keeps who did and why.
//
// The record is a value: pure functions over it decide what counts, and the operator stores it as JSON
// in ConfigMap slipway-fleet-record (ConfigMapName), written with optimistic concurrency
// (resourceVersion). Every list is bounded (Bound) so the object never nears the API server's 1 MiB.
package fleetrecord

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ConfigMapName is the record's ConfigMap, in the operator's namespace; Key the data key holding it.
const (
	ConfigMapName = "slipway-fleet-record"
	Key           = "record"
)

// Bounds on what the record keeps (Bound). MaxFailures is also the most --max-failed-reboots and
// --max-failed-per-version can usefully be: a count larger than what is kept could never be reached.
const (
	MaxFailures = 200
	MaxProofs   = 200
	MaxResumes  = 50
	MaxWhy      = 256
)

// Failure reasons (Failure.Reason), as the operator's failed-reboots metric labels them.
const (
	ReasonStalled    = "stalled"
	ReasonOldVersion = "old-version"
	ReasonBlocker    = "blocker"
	// ReasonReplaced: the Node was deleted after its grant, before its cycle finished (a machine health
	// check, cloud auto-repair, cluster-autoscaler, a person). The machine never proved its version: it
	// holds its canary place like a stall and counts toward the version's halt.
	ReasonReplaced = "replaced"
)

// Failure is one failed reboot the fleet remembers.
type Failure struct {
	Node string `json:"node"`
	// UID of the Node it happened on: a Node re-created under the same name is another machine.
	UID    string `json:"uid,omitempty"`
	Reason string `json:"reason"`
	// Version: the OS version it failed for. Set, it counts toward that version's halt
	// (--max-failed-per-version) and holds its canaries.
	Version string    `json:"version,omitempty"`
	At      time.Time `json:"at"`
	Why     string    `json:"why,omitempty"`
	// Budget: it counts against --max-failed-reboots.
	Budget bool `json:"budget,omitempty"`
}

// Proof is one reboot cycle the operator ran and saw end well: admitted for Version, the kubelet's
// boot ID changed, the node came back Ready on Version. Only proofs release canaries; a node merely
// seen on a version (new, replaced, rebooted by hand, relabelled) proves nothing.
type Proof struct {
	Node    string    `json:"node"`
	UID     string    `json:"uid,omitempty"`
	Version string    `json:"version"`
	At      time.Time `json:"at"` // when the operator finished the cycle: a canary's bake starts here
	BootID  string    `json:"bootID,omitempty"`
}

// Resume is a person's release: of one OS version's halt and canary failures (Version set), or of the
// failure budget (Version ""). Failures recorded before At no longer count for it.
type Resume struct {
	Version string    `json:"version,omitempty"`
	By      string    `json:"by"`
	At      time.Time `json:"at"` // the API server's clock, never the client's
	Why     string    `json:"why,omitempty"`
}

// Record is the fleet's memory.
type Record struct {
	Failures []Failure `json:"failures,omitempty"`
	Proofs   []Proof   `json:"proofs,omitempty"`
	Resumes  []Resume  `json:"resumes,omitempty"`
}

// Decode reads a record; "" is the empty record. Anything unreadable is an error: the caller must not
// treat a record it cannot read as empty (that would lift every halt).
func Decode(s string) (Record, error) {
	var r Record
	if strings.TrimSpace(s) == "" {
		return r, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("fleet record: %w", err)
	}
	for _, f := range r.Failures {
		if f.Node == "" || f.At.IsZero() {
			return Record{}, fmt.Errorf("fleet record: a failure without node or time (%+v)", f)
		}
	}
	for _, p := range r.Proofs {
		if p.Node == "" || p.Version == "" || p.At.IsZero() {
			return Record{}, fmt.Errorf("fleet record: a proof without node, version or time (%+v)", p)
		}
	}
	for _, x := range r.Resumes {
		if x.At.IsZero() {
			return Record{}, fmt.Errorf("fleet record: a resume without time (%+v)", x)
		}
	}
	r.sort()
	return r, nil
}

// Encode writes the record, bounded, in a stable form (the same record always encodes the same).
func (r Record) Encode() string {
	r = r.Clone()
	r.Bound()
	b, _ := json.Marshal(r)
	return string(b)
}

// SameButProofs reports whether r and o hold the same failures and resumes, as stored (bounded);
// their proofs may differ.
func (r Record) SameButProofs(o Record) bool {
	return Record{Failures: r.Failures, Resumes: r.Resumes}.Encode() == Record{Failures: o.Failures, Resumes: o.Resumes}.Encode()
}

// Clone is a deep copy.
func (r Record) Clone() Record {
	return Record{
		Failures: append([]Failure(nil), r.Failures...),
		Proofs:   append([]Proof(nil), r.Proofs...),
		Resumes:  append([]Resume(nil), r.Resumes...),
	}
}

// AddFailure records f unless an equal one is there; it reports whether the record changed.
func (r *Record) AddFailure(f Failure) bool {
	f.At = f.At.UTC().Truncate(time.Second)
	f.Why = clip(f.Why, MaxWhy)
	for _, g := range r.Failures {
		same := g.UID == f.UID && g.Node == f.Node && g.Reason == f.Reason && g.Version == f.Version && g.Budget == f.Budget
		// One machine is replaced once per version: two leaders that both saw the deletion (a cut
		// leader after the cut heals, and its successor) date it each by its own clock.
		if same && (g.At.Equal(f.At) || f.Reason == ReasonReplaced && f.UID != "") {
			return false
		}
	}
	r.Failures = append(r.Failures, f)
	r.sort()
	return true
}

// AddProof records p: one proof per machine (node and UID) and version, the latest finish. A proof
// is written before the cycle's last PATCH; a leader killed in between leaves the PATCH to the next,
// whose finish is the later one -- and the bake must start from the finish the fleet saw. It reports
// whether the record changed.
//
// The record keeps whole seconds; a proof's time is rounded up, never down: a canary's bake and a
// version's soak count from it, and a finish dated up to a second early would cut them short.
func (r *Record) AddProof(p Proof) bool {
	p.At = ceilSecond(p.At)
	for i, q := range r.Proofs {
		if q.UID == p.UID && q.Node == p.Node && q.Version == p.Version {
			if !p.At.After(q.At) {
				return false
			}
			r.Proofs[i] = p
			r.sort()
			return true
		}
	}
	r.Proofs = append(r.Proofs, p)
	r.sort()
	return true
}

// ceilSecond is t in UTC rounded up to a whole second.
func ceilSecond(t time.Time) time.Time {
	t = t.UTC()
	if w := t.Truncate(time.Second); w.Before(t) {
		return w.Add(time.Second)
	}
	return t
}

// AddResume records x.
func (r *Record) AddResume(x Resume) {
	x.At = x.At.UTC().Truncate(time.Second)
	x.Why = clip(x.Why, MaxWhy)
	r.Resumes = append(r.Resumes, x)
	r.sort()
}

// Merge adds every entry of o not in r (a leader's own additions onto the stored record, or the
// stored record onto them); it reports whether r changed. Resumes are matched whole.
func (r *Record) Merge(o Record) bool {
	changed := false
	for _, f := range o.Failures {
		changed = r.AddFailure(f) || changed
	}
	for _, p := range o.Proofs {
		changed = r.AddProof(p) || changed
	}
	for _, x := range o.Resumes {
		x.At = x.At.UTC().Truncate(time.Second)
		x.Why = clip(x.Why, MaxWhy)
		found := false
		for _, y := range r.Resumes {
			if sameResume(x, y) {
				found = true
				break
			}
		}
		if !found {
			r.Resumes = append(r.Resumes, x)
			changed = true
		}
	}
	r.sort()
	return changed
}

// MaxResumeSkew is how far past a reader's clock a resume may be dated and still count: the API server
// and the operator's node disagree by seconds, not more.
const MaxResumeSkew = 5 * time.Minute

// DropFuture returns r without the resumes dated after limit (the reader's clock plus MaxResumeSkew),
// and those resumes. A resume dated in 2100 would otherwise forgive every failure and halt until then.
func (r Record) DropFuture(limit time.Time) (Record, []Resume) {
	var future []Resume
	keep := r.Resumes[:0:0]
	for _, x := range r.Resumes {
		if x.At.After(limit) {
			future = append(future, x)
			continue
		}
		keep = append(keep, x)
	}
	r.Resumes = keep
	return r, future
}

// Proved reports whether the machine uid (on node) has a proof for version v: its cycle for v finished.
func (r Record) Proved(node, uid, v string) bool {
	for _, p := range r.Proofs {
		if p.Node == node && p.UID == uid && p.Version == v {
			return true
		}
	}
	return false
}

// ResumedAt is when the last resume of version v ("" : of the failure budget) happened (zero: never).
func (r Record) ResumedAt(v string) time.Time {
	var t time.Time
	for _, x := range r.Resumes {
		if x.Version == v && x.At.After(t) {
			t = x.At
		}
	}
	return t
}

// LastResume is the last resume of version v ("": of the failure budget), ok false when none.
func (r Record) LastResume(v string) (Resume, bool) {
	var out Resume
	ok := false
	for _, x := range r.Resumes {
		if x.Version == v && (!ok || !x.At.Before(out.At)) {
			out, ok = x, true
		}
	}
	return out, ok
}

// VersionResumedAt is ResumedAt for an OS version (admission's Memory).
func (r Record) VersionResumedAt(v string) time.Time {
	if v == "" {
		return time.Time{}
	}
	return r.ResumedAt(v)
}

// VersionFailures are the times of every failure recorded for version v that still counts, sorted
// (resumed or not: the caller counts from the resume it reads).
func (r Record) VersionFailures(v string) []time.Time {
	var out []time.Time
	for _, f := range r.Failures {
		if v != "" && f.Version == v && !r.late(f) {
			out = append(out, f.At)
		}
	}
	return out
}

// VersionStalls are the times of the canaries of v that never finished and still count, sorted: the
// grant time of each stall after the grant, the deletion time of each Node replaced after its grant.
func (r Record) VersionStalls(v string) []time.Time {
	var out []time.Time
	for _, f := range r.Failures {
		if v != "" && f.Version == v && holdsPlace(f) && !r.late(f) {
			out = append(out, f.At)
		}
	}
	return out
}

// late reports whether f is a stall after the grant that the same machine later got over: it finished
// the cycle on the version it stalled for (a proof at or after the stall). Such a node was late, not
// failed: its stall held the version's canaries while it lasted and counts no more (Bound forgets it).
// A machine that never finishes -- deleted, replaced, or lost -- keeps its stall counting.
func (r Record) late(f Failure) bool {
	if f.Reason != ReasonStalled || f.Version == "" || f.Budget {
		return false
	}
	for _, p := range r.Proofs {
		if p.Version == f.Version && p.Node == f.Node && p.UID == f.UID && !p.At.Before(f.At) {
			return true
		}
	}
	return false
}

// VersionProofs are the times the cycles the operator ran for version v finished, sorted, leaving out
// the proofs of machines still in their cycle for v (inCycle(uid); nil: none): a proof is written just
// before the PATCH that ends the cycle, and counts once that has landed.
func (r Record) VersionProofs(v string, inCycle func(uid string) bool) []time.Time {
	var out []time.Time
	for _, p := range r.Proofs {
		if p.Version == v && (inCycle == nil || !inCycle(p.UID)) {
			out = append(out, p.At)
		}
	}
	return out
}

// BudgetFailures are the nodes whose failures count against --max-failed-reboots now: recorded at or
// after the last resume of the failure budget, one per machine (UID, else name), sorted by name.
func (r Record) BudgetFailures() []string {
	reset := r.ResumedAt("")
	seen := map[string]bool{}
	var out []string
	for _, f := range r.Failures {
		if !f.Budget || f.At.Before(reset) {
			continue
		}
		id := f.machine()
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, f.Node)
	}
	sort.Strings(out)
	return out
}

// Halted lists the versions that have at least max failures since their last resume (max 0: none).
func (r Record) Halted(max int) []string {
	if max <= 0 {
		return nil
	}
	count := map[string]int{}
	for _, f := range r.Failures {
		if r.countsForVersion(f) {
			count[f.Version]++
		}
	}
	var out []string
	for v, n := range count {
		if n >= max {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// Bound keeps the record within its limits without changing any decision it feeds. Late stalls go
// first (they count no more). Beyond MaxFailures entries it drops, oldest first, only failures that
// decide nothing: spent ones (before their version's and the budget's last resume), a version's
// counting failures beyond its newest MaxFailures (MaxFailures is the most --max-failed-per-version
// can be: a version with that many is halted under every setting), and a machine's older budget
// failures (the budget counts machines) or those beyond the newest MaxFailures machines. What holds a
// halt, a canary's place (a stall or a replaced canary since the version's resume) or a version's
// "failed since resumed" is never bounded away, so a flood of other versions' failures -- one node
// can make a new version string per cycle -- lifts nothing. Such a record may pass MaxFailures
// entries; the reasons of all but the newest MaxFailures are then cleared (the Events and the log
// keep them), so an entry is ~150 bytes and the ConfigMap's 1 MiB holds some 7,000 failed cycles. A
// machine that fails a new version string every cycle (one the agent names) grows it by one entry per
// failed cycle, each a full admitted cycle and a RebootOldVersion Warning; nothing bounds that short of
// a person resuming those versions.
func (r *Record) Bound() {
	r.sort()
	// Late stalls count no more; forgotten before any proof that makes them late is trimmed.
	kept := r.Failures[:0:0]
	for _, f := range r.Failures {
		if !r.late(f) {
			kept = append(kept, f)
		}
	}
	r.Failures = kept
	if n := len(r.Failures) - MaxFailures; n > 0 {
		needed := r.neededFailures()
		var keep []Failure
		for i, f := range r.Failures {
			if !needed[i] && n > 0 {
				n--
				continue
			}
			keep = append(keep, f)
		}
		r.Failures = keep
		for i := 0; i < len(r.Failures)-MaxFailures; i++ {
			r.Failures[i].Why = ""
		}
	}
	if len(r.Proofs) > MaxProofs {
		r.Proofs = r.Proofs[len(r.Proofs)-MaxProofs:]
	}
	if len(r.Resumes) > MaxResumes {
		// Keep the newest of each scope first: they are what decides.
		last := map[string]Resume{}
		for _, x := range r.Resumes {
			last[x.Version] = x
		}
		var keep []Resume
		extra := MaxResumes - len(last)
		for i := len(r.Resumes) - 1; i >= 0; i-- {
			x := r.Resumes[i]
			if sameResume(last[x.Version], x) {
				keep = append(keep, x)
			} else if extra > 0 {
				keep = append(keep, x)
				extra--
			}
		}
		r.Resumes = keep
	}
	r.sort()
}

// neededFailures marks the failures (by index, r.Failures sorted oldest first) some decision reads:
// each version's stalls and replaced canaries since its resume, its newest MaxFailures counting
// failures, and the newest budget failure of each of the newest MaxFailures machines since the
// budget's resume.
func (r Record) neededFailures() []bool {
	needed := make([]bool, len(r.Failures))
	perVersion := map[string]int{}
	machines := map[string]bool{}
	budgetReset := r.ResumedAt("")
	for i := len(r.Failures) - 1; i >= 0; i-- {
		f := r.Failures[i]
		if r.countsForVersion(f) {
			if holdsPlace(f) || perVersion[f.Version] < MaxFailures {
				needed[i] = true
			}
			perVersion[f.Version]++
		}
		if f.Budget && !f.At.Before(budgetReset) {
			if id := f.machine(); !machines[id] && len(machines) < MaxFailures {
				machines[id] = true
				needed[i] = true
			}
		}
	}
	return needed
}

// countsForVersion reports whether f counts toward its version's halt and canaries now: recorded at
// or after the version's last resume, and not a stall its machine got over (late).
func (r Record) countsForVersion(f Failure) bool {
	return f.Version != "" && !f.At.Before(r.ResumedAt(f.Version)) && !r.late(f)
}

// machine names the machine f happened on: its Node's UID, else (a failure recorded without one) its
// name. The failure budget counts machines, not failures.
func (f Failure) machine() string {
	if f.UID != "" {
		return f.UID
	}
	return "name:" + f.Node
}

// holdsPlace reports whether f is a canary that never finished: it stalled after its grant, or its
// Node was deleted after the grant (ReasonReplaced). Either holds its version's canary place until a
// person resumes the version.
func holdsPlace(f Failure) bool {
	return !f.Budget && (f.Reason == ReasonStalled || f.Reason == ReasonReplaced)
}

// sort keeps every list oldest first (ties in a stable, total order) so equal records encode equally.
func (r *Record) sort() {
	sort.SliceStable(r.Failures, func(i, j int) bool {
		a, b := r.Failures[i], r.Failures[j]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		return fmt.Sprint(a) < fmt.Sprint(b)
	})
	sort.SliceStable(r.Proofs, func(i, j int) bool {
		a, b := r.Proofs[i], r.Proofs[j]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		return fmt.Sprint(a) < fmt.Sprint(b)
	})
	sort.SliceStable(r.Resumes, func(i, j int) bool {
		a, b := r.Resumes[i], r.Resumes[j]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		return fmt.Sprint(a) < fmt.Sprint(b)
	})
}

func sameResume(a, b Resume) bool {
	return a.Version == b.Version && a.By == b.By && a.Why == b.Why && a.At.Equal(b.At)
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n]
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
