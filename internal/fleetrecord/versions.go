package fleetrecord

import (
	"encoding/json"
	"fmt"
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
// saw each one staged (a pool's minAge counts from there, across restarts and deleted Nodes).
type Versions struct {
	Seen []Seen `json:"seen,omitempty"`
}

// Seen is the first time the fleet saw Version staged, and on which node.
type Seen struct {
	Version string    `json:"version"`
	At      time.Time `json:"at"`
	Node    string    `json:"node,omitempty"`
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

// Merge takes o's sightings in (the earliest of each version wins) and reports whether v changed.
func (v *Versions) Merge(o Versions) bool {
	changed := false
	for _, x := range o.Seen {
		changed = v.See(x.Version, x.Node, x.At) || changed
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
	sort.SliceStable(v.Seen, func(i, j int) bool {
		if !v.Seen[i].At.Equal(v.Seen[j].At) {
			return v.Seen[i].At.Before(v.Seen[j].At)
		}
		return v.Seen[i].Version < v.Seen[j].Version
	})
}
