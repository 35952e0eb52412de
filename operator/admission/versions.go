package admission

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/protocol"
)

// Canary configures per-version canaries and halts: for each OS version nodes ask for, the first
// Nodes of them go alone (within the budget) and the others wait until those finished on it and Bake
// passed with no failure for it (--canary-nodes, --canary-bake); after MaxFailed failures for one
// version, no node asking for it is admitted until a person resumes it (--max-failed-per-version).
// The zero value turns both off.
type Canary struct {
	Nodes     int
	Bake      time.Duration
	MaxFailed int
}

// On reports whether canaries or halts are configured.
func (c Canary) On() bool { return c.Nodes > 0 || c.MaxFailed > 0 }

// VersionStats is what the fleet shows of one OS version: what its Nodes say now (VersionsOf) and
// what the fleet remembers of it (WithMemory).
type VersionStats struct {
	On       int // nodes running it, out of their cycle (proof of nothing: new, replaced or relabelled nodes are on it too)
	InFlight int // nodes in their cycle for it (asking for it, or back on it and not finished)
	Asking   int // nodes waiting to reboot for it
	// Finished: when each cycle the operator ran for it finished on it (Memory.VersionProofs), sorted:
	// the only canary proof.
	Finished []time.Time
	// Failures: every failure the fleet recorded for it (Memory.VersionFailures), sorted; Stalls: the
	// stalls after the grant among them (Memory.VersionStalls), by grant time. A stalled canary is a
	// canary that never finished: it holds its canary place until a person resumes the version, on its
	// Node or -- the Node deleted, replaced -- in the record.
	Failures []time.Time
	Stalls   []time.Time
	// inCycle: the UIDs of the nodes in InFlight (a proof of one of them is not counted yet).
	inCycle map[string]bool
	// Stalled: the grant times of the nodes in InFlight that stalled after their grant. Until a person
	// resumes the version such a node is a canary that never finished (the others wait); after, it is
	// only the failure the person looked at, and another node may be the canary.
	Stalled []time.Time
}

// Memory is what the fleet remembers of OS versions beyond any one Node: the operator's fleet record
// (fleetrecord.Record is one). A Node deleted, relabelled or stripped of its marks changes none of it.
type Memory interface {
	VersionResumedAt(version string) time.Time
	// VersionFailures: when each failure for the version was recorded; VersionProofs: when each cycle
	// the operator ran for it finished on it. Both sorted.
	VersionFailures(version string) []time.Time
	VersionStalls(version string) []time.Time
	// VersionProofs leaves out the proofs of machines inCycle says are still in their cycle for it.
	VersionProofs(version string, inCycle func(uid string) bool) []time.Time
}

// WithMemory is s with the failures and proofs m remembers for v (m nil: none).
func WithMemory(s VersionStats, v string, m Memory) VersionStats {
	s.Failures, s.Stalls, s.Finished = nil, nil, nil
	if m != nil {
		s.Failures, s.Stalls, s.Finished = m.VersionFailures(v), m.VersionStalls(v), m.VersionProofs(v, func(uid string) bool { return s.inCycle[uid] })
	}
	return s
}

// FailuresSince counts the failures recorded at or after t.
func (s VersionStats) FailuresSince(t time.Time) int {
	n := 0
	for _, f := range s.Failures {
		if !f.Before(t) {
			n++
		}
	}
	return n
}

// VersionsOf summarises entries by OS version: what the Nodes say now. Failures and proofs are not
// theirs to say (WithMemory).
func VersionsOf(entries []Node) map[string]*VersionStats {
	out := map[string]*VersionStats{}
	get := func(v string) *VersionStats {
		s, ok := out[v]
		if !ok {
			s = &VersionStats{}
			out[v] = s
		}
		return s
	}
	for _, e := range entries {
		switch {
		case e.State.InCycle() && (e.AskedVersion != "" || e.Version != ""):
			v := e.AskedVersion
			if v == "" {
				v = e.Version // back on it, the cycle not finished yet
			}
			s := get(v)
			s.InFlight++
			if e.UID != "" {
				if s.inCycle == nil {
					s.inCycle = map[string]bool{}
				}
				s.inCycle[e.UID] = true
			}
			if e.StalledVersion == v {
				s.Stalled = append(s.Stalled, e.StalledAt)
			}
		case e.Version != "":
			get(e.Version).On++
		}
		if e.Waiting() && e.AskedVersion != "" {
			get(e.AskedVersion).Asking++
		}
	}
	return out
}

// CanaryState is where version v stands with its canaries at now: "released" (proven: enough nodes
// finished on it and the bake passed with no failure since resumed), "baking" (until BakeEnd),
// "canaries" (fewer than Nodes on it or in flight: more may go), "waiting" (Nodes in flight), "halted"
// (MaxFailed failures), or "off".
type CanaryState struct {
	State    string
	BakeEnd  time.Time
	Failures int
}

// CanaryOf decides version v's state from its stats, the configuration and when a person last
// resumed it (zero: never). inFlightExtra counts nodes the current plan admits for it already.
func CanaryOf(s VersionStats, c Canary, resumed, now time.Time, inFlightExtra int) CanaryState {
	failures := s.FailuresSince(resumed)
	if c.MaxFailed > 0 && failures >= c.MaxFailed {
		return CanaryState{State: "halted", Failures: failures}
	}
	if c.Nodes <= 0 {
		return CanaryState{State: "off", Failures: failures}
	}
	if len(s.Finished) >= c.Nodes && failures == 0 {
		end := s.Finished[c.Nodes-1].Add(c.Bake)
		if !now.Before(end) {
			return CanaryState{State: "released", BakeEnd: end}
		}
		return CanaryState{State: "baking", BakeEnd: end}
	}
	// The canary places taken: proven cycles, canaries in flight that did not stall, and stalled
	// canaries not yet resumed -- still on their Node or remembered after it was deleted (a stall
	// before the person resumed the version is no canary any more).
	inFlight := s.InFlight - len(s.Stalled)
	for _, t := range s.Stalls {
		if !t.Before(resumed) {
			inFlight++
		}
	}
	if len(s.Finished)+inFlight+inFlightExtra < c.Nodes {
		return CanaryState{State: "canaries", Failures: failures}
	}
	return CanaryState{State: "waiting", Failures: failures}
}

// versionCheck is the canary and halt decision for one node under canary c: pass when it asks for no
// version or canaries and halts are off. extra counts the nodes the plan admitted for that version
// already.
func versionCheck(e Node, c Canary, sw Switch, now time.Time, stats map[string]*VersionStats, extra map[string]int) Verdict {
	v := e.AskedVersion
	if !c.On() || v == "" {
		return Pass
	}
	mem, _ := sw.(Memory) // a switch without memory: no failures, no proofs (canaries wait, fail closed)
	var resumed time.Time
	if mem != nil {
		resumed = mem.VersionResumedAt(v)
	}
	var s VersionStats
	if p := stats[v]; p != nil {
		s = *p
	}
	s = WithMemory(s, v, mem)
	return versionVerdict(v, CanaryOf(s, c, resumed, now, extra[v]), c, now)
}

// FirstSeen is the part of the fleet's memory that knows when each OS version was first seen staged
// (fleetrecord.Versions); a Switch that has it gives it to DeclaredVersionGate.
type FirstSeen interface {
	VersionFirstSeen(version string) time.Time
}

// Halts is the part of the fleet's memory that knows the halts people set (kubectl slipway pause
// --version) and not yet resumed.
type Halts interface {
	VersionHalt(version string) (fleetrecord.Halt, bool)
	HaltsInForce() []string
}

// DeclaredVersionGate holds a node whose staged OS version a person halted (kubectl slipway pause
// --version, until resume --version), or its policy does not let it reboot into:
// denied, not allowed, or younger than the policy's minimum age since the fleet first saw it staged.
// A version the node's agent does not name cannot be judged and is held too. It takes no budget (a
// waiting node never does); a policy edit or the age reached lets the node go.
var DeclaredVersionGate = Gate{Name: "declared-version", Scope: ScopeNode, Plan: PlanFilter,
	Doc: "the OS version it staged is halted by a person (`kubectl slipway pause --version`), or one its policy does not let it reboot into yet (`--deny-version`, `--allow-version`, `--version-min-age`, a RebootPolicy's `versions`)",
	Check: func(_ context.Context, in Input) Verdict {
		p := in.pol()
		if m, ok := in.Fleet.Switch.(Halts); ok {
			if in.Node.AskedVersion == "" {
				// Whatever it staged may be a halted version: held while any halt is in force.
				if halted := m.HaltsInForce(); len(halted) > 0 {
					return Held(KindVersionHalted, "its agent does not say which version it staged, and versions are halted: "+strings.Join(halted, ", "), 0)
				}
			} else {
				v := protocol.NormalVersion(in.Node.AskedVersion)
				if h, ok := m.VersionHalt(v); ok {
					why, at := "", ""
					if h.Why != "" {
						why = ": " + h.Why
					}
					if !h.At.IsZero() {
						at = " at " + h.At.UTC().Format(time.RFC3339)
					}
					return Held(KindVersionHalted, fmt.Sprintf("%s halted by %s%s%s; kubectl slipway resume --version %s releases it", v, h.By, at, why, v), 0)
				}
			}
		}
		if p.Versions.Empty() {
			return Pass
		}
		who := "the flags"
		if p.Name != "" {
			who = "rp/" + p.Name
		}
		v := in.Node.AskedVersion
		if v == "" {
			return Held(KindVersion, "its agent does not say which version it staged, and "+who+" says which versions it may reboot into", 0)
		}
		var first time.Time
		if m, ok := in.Fleet.Switch.(FirstSeen); ok {
			first = m.VersionFirstSeen(protocol.NormalVersion(v))
		}
		d := p.Versions.Decide(v, first, in.Now)
		if d.Allowed {
			return Pass
		}
		var retry time.Duration
		if !d.Until.IsZero() {
			retry = d.Until.Sub(in.Now) + 10*time.Millisecond
		}
		var why string
		switch d.Rule {
		case "deny":
			why = fmt.Sprintf("%s denied by %s (deny: %s)", v, who, d.Matched)
		case "allow":
			why = fmt.Sprintf("%s not allowed by %s (allow: %s)", v, who, d.Matched)
		default:
			why = fmt.Sprintf("%s allowed from %s (minAge %s, %s)", v, d.Until.UTC().Format(time.RFC3339), p.Versions.MinAge, who)
		}
		return Held(KindVersion, why, retry)
	}}

// VersionGate holds a node asking for a halted version whatever the budget says, so the reason it
// shows is the halt; the plan also asks it about each node the budget has room for, where a version
// whose canaries have not proven it holds the others (their reason then comes from the plan, after the
// budget's).
var VersionGate = Gate{Name: "version", Scope: ScopeNode, Plan: PlanCheck,
	Doc: "its OS version is halted (`--max-failed-per-version`: whatever the budget says), or, asked by the plan, that version's canaries go first (`--canary-nodes`, `--canary-bake`)",
	Check: func(_ context.Context, in Input) Verdict {
		c := in.pol().Canary
		if in.Planning != nil {
			return versionCheck(in.Node, c, in.Fleet.Switch, in.Now, in.Fleet.Versions(), in.Planning.Extra)
		}
		if v := versionCheck(in.Node, c, in.Fleet.Switch, in.Now, in.Fleet.Versions(), nil); v.Kind == KindVersionHalted {
			return v
		}
		return Pass
	}}

// versionVerdict holds a node asking for v unless v's canary state lets it go.
func versionVerdict(v string, st CanaryState, c Canary, now time.Time) Verdict {
	switch st.State {
	case "halted":
		return Held(KindVersionHalted, fmt.Sprintf("%d failed reboots for %s (--max-failed-per-version=%d); kubectl slipway resume --version %s releases it", st.Failures, v, c.MaxFailed, v), 0)
	case "baking":
		return Held(KindCanary, fmt.Sprintf("canaries of %s finished; baking until %s (--canary-bake %s)", v, st.BakeEnd.UTC().Format(time.RFC3339), c.Bake), st.BakeEnd.Sub(now)+10*time.Millisecond)
	case "waiting":
		why := fmt.Sprintf("%d canaries of %s go first (--canary-nodes)", c.Nodes, v)
		if st.Failures > 0 {
			why += fmt.Sprintf("; %d failed for it: a person looks, then kubectl slipway resume --version %s", st.Failures, v)
		}
		return Held(KindCanary, why, 0)
	}
	return Pass
}
