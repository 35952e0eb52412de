package fleetrecord

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// VersionsKey is the data key of the versions document in the record's ConfigMap. It sits beside
// the record, not in it: an operator of an earlier release reads the record strictly (an unknown
// field would read as a broken record and hold every admission during a rolling upgrade), while it
// rewrites only its own key and leaves this one as it is.
const VersionsKey = "versions"

// MaxSeen bounds the versions remembered. Past it the earliest seen are forgotten: one staged again
// is first seen anew, later, so a minimum age only ever waits longer, never less.
const MaxSeen = 500

// Versions is what the fleet remembers per OS version, apart from failures and proofs: when it first
// saw each one staged (a pool's minAge counts from there, across restarts and deleted Nodes), and the
// halts people set (kubectl slipway pause --version) and lifted (resume --version).
type Versions struct {
	Seen  []Seen `json:"seen,omitempty"`
	Halts []Halt `json:"halts,omitempty"`
}

// Seen is the first time the fleet saw Version staged, and on which node.
type Seen struct {
	Version string    `json:"version"`
	At      time.Time `json:"at"`
	Node    string    `json:"node,omitempty"`
}

// Halt is a person's halt of one OS version: no node is admitted for it until a person lifts it
// (kubectl slipway resume --version, which lifts every halt of the version it saw, in the same write
// as its resume: no clock decides which came first, so a halt and a resume in one second cannot
// cross).
type Halt struct {
	Version string    `json:"version"`
	By      string    `json:"by"`
	At      time.Time `json:"at"` // the API server's clock, never the client's
	Why     string    `json:"why,omitempty"`
	Lifted  *Lift     `json:"lifted,omitempty"`
}

// Lift is who lifted a halt, and when.
type Lift struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// MaxHalts bounds the lifted halts kept (the newest); halts in force are all kept.
const MaxHalts = 100

func sameHalt(a, b Halt) bool { return a.Version == b.Version && a.At.Equal(b.At) && a.By == b.By }

// AddHalt records h (once; a lift merges into the one recorded) and reports whether v changed.
func (v *Versions) AddHalt(h Halt) bool {
	if h.Version == "" || h.At.IsZero() {
		return false
	}
	h.Why = clip(h.Why, MaxWhy)
	for i, x := range v.Halts {
		if sameHalt(x, h) {
			if x.Lifted == nil && h.Lifted != nil {
				l := *h.Lifted
				v.Halts[i].Lifted = &l
				return true
			}
			return false
		}
	}
	v.Halts = append(v.Halts, h)
	v.sort()
	// Past MaxHalts the oldest lifted halts go; a halt in force is never dropped (it holds a version
	// that may brick nodes until a person lifts it).
	for len(v.Halts) > MaxHalts {
		i := slices.IndexFunc(v.Halts, func(x Halt) bool { return x.Lifted != nil })
		if i < 0 {
			break
		}
		v.Halts = slices.Delete(v.Halts, i, i+1)
	}
	return true
}

// InForce are the versions with a halt in force, sorted.
func (v Versions) InForce() []string {
	var out []string
	for _, h := range v.Halts {
		if h.Lifted == nil && !slices.Contains(out, h.Version) {
			out = append(out, h.Version)
		}
	}
	sort.Strings(out)
	return out
}

// Lift lifts every halt of version in force, as by at, and says how many.
func (v *Versions) Lift(version, by string, at time.Time) int {
	n := 0
	for i := range v.Halts {
		if v.Halts[i].Version == version && v.Halts[i].Lifted == nil {
			v.Halts[i].Lifted = &Lift{By: by, At: at}
			n++
		}
	}
	return n
}

// HaltOf is version's newest halt in force (not lifted), if any.
func (v Versions) HaltOf(version string) (Halt, bool) {
	for i := len(v.Halts) - 1; i >= 0; i-- {
		if h := v.Halts[i]; h.Version == version && h.Lifted == nil {
			return h, true
		}
	}
	return Halt{}, false
}

// DecodeVersions reads a versions document; "" is the empty one. Unknown fields are read past (a
// later release may add some); a document that does not parse is an error, never read as empty
// (that would restart every minimum age).
func DecodeVersions(s string) (Versions, error) {
	var v Versions
	if strings.TrimSpace(s) == "" {
		return v, nil
	}
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return Versions{}, fmt.Errorf("fleet versions: %w", err)
	}
	for _, x := range v.Seen {
		if x.Version == "" || x.At.IsZero() {
			return Versions{}, fmt.Errorf("fleet versions: an entry without version or time (%+v)", x)
		}
	}
	for _, h := range v.Halts {
		if h.Version == "" || h.At.IsZero() {
			return Versions{}, fmt.Errorf("fleet versions: a halt without version or time (%+v)", h)
		}
	}
	v.sort()
	return v, nil
}

// Encode is the document as stored: sorted, so equal documents encode equally.
func (v Versions) Encode() string {
	v.sort()
	b, _ := json.Marshal(v)
	return string(b)
}

// FirstSeen is when the fleet first saw version staged (zero: never).
func (v Versions) FirstSeen(version string) time.Time {
	for _, x := range v.Seen {
		if x.Version == version {
			return x.At
		}
	}
	return time.Time{}
}

// See records that node staged version at at; an earlier sighting wins. It reports whether the
// document changed.
func (v *Versions) See(version, node string, at time.Time) bool {
	if version == "" || at.IsZero() {
		return false
	}
	for i, x := range v.Seen {
		if x.Version == version {
			if !at.Before(x.At) {
				return false
			}
			v.Seen[i] = Seen{Version: version, At: at, Node: node}
			v.sort()
			return true
		}
	}
	v.Seen = append(v.Seen, Seen{Version: version, At: at, Node: node})
	v.bound()
	return true
}

// Merge takes o's sightings (the earliest of each version wins) and halts in and reports whether v
// changed.
func (v *Versions) Merge(o Versions) bool {
	changed := false
	for _, x := range o.Seen {
		changed = v.See(x.Version, x.Node, x.At) || changed
	}
	for _, h := range o.Halts {
		changed = v.AddHalt(h) || changed
	}
	return changed
}

// bound keeps the MaxSeen most recently first-seen versions.
func (v *Versions) bound() {
	v.sort()
	if len(v.Seen) > MaxSeen {
		v.Seen = append([]Seen(nil), v.Seen[len(v.Seen)-MaxSeen:]...)
	}
}

func (v *Versions) sort() {
	sort.SliceStable(v.Halts, func(i, j int) bool {
		if !v.Halts[i].At.Equal(v.Halts[j].At) {
			return v.Halts[i].At.Before(v.Halts[j].At)
		}
		return v.Halts[i].Version+v.Halts[i].By < v.Halts[j].Version+v.Halts[j].By
	})
	sort.SliceStable(v.Seen, func(i, j int) bool {
		if !v.Seen[i].At.Equal(v.Seen[j].At) {
			return v.Seen[i].At.Before(v.Seen[j].At)
		}
		return v.Seen[i].Version < v.Seen[j].Version
	})
}
