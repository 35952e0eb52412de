// Package versions says which Flatcar versions a pool may reboot into: an allow list and a deny list
// of exact versions and ranges, and a minimum age since the fleet first saw a version staged. Pure:
// known-answer and property tests, no API server.
//
// A rule is an exact version ("4459.2.1", "4459.2.1+dev-1") or a range: comparators joined by
// spaces, all of which must hold (">=4459.2.0 <4500.0.0"). Ranges compare the release
// (major.minor.patch, numbers as numbers) and ignore build metadata after "+" or "-", as semantic
// versioning does: a developer build 4459.2.1+dev-1 is in ">=4459.2.0". An exact rule matches only
// that exact version (in its normal form, protocol.NormalVersion).
package versions

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// Rule is one entry of an allow or deny list.
type Rule struct {
	text  string
	exact string       // an exact version (normal form), or ""
	cmps  []comparator // a range: all hold
}

type comparator struct {
	op      string // ">=", ">", "<=", "<", "="
	release [3]uint64
}

// String is the rule as written.
func (r Rule) String() string { return r.text }

// Parse reads one rule. Errors say what is wrong and what a rule looks like.
func Parse(s string) (Rule, error) {
	text := strings.Join(strings.Fields(s), " ")
	if text == "" {
		return Rule{}, fmt.Errorf("empty rule: want a version (4459.2.1) or a range (>=4459.2.0 <4500.0.0)")
	}
	if len(text) > 256 {
		return Rule{}, fmt.Errorf("rule of %d characters: at most 256", len(text))
	}
	if !strings.ContainsAny(text, "<>=") {
		if strings.Contains(text, " ") {
			return Rule{}, fmt.Errorf("%q: one version per rule, or comparators (>=, >, <=, <, =) for a range", text)
		}
		if err := protocol.ValidVersion(text); err != nil {
			return Rule{}, fmt.Errorf("%q: %w", text, err)
		}
		exact := protocol.NormalVersion(text)
		if exact == "" || strings.Trim(exact, "._-") == "" {
			return Rule{}, fmt.Errorf("%q names no version", text)
		}
		return Rule{text: text, exact: exact}, nil
	}
	r := Rule{text: text}
	for _, f := range strings.Fields(text) {
		op := ""
		for _, o := range []string{">=", "<=", ">", "<", "="} {
			if strings.HasPrefix(f, o) {
				op = o
				break
			}
		}
		if op == "" {
			return Rule{}, fmt.Errorf("%q: %q has no comparator; a range is comparators joined by spaces, e.g. >=4459.2.0 <4500.0.0", text, f)
		}
		if f == op {
			return Rule{}, fmt.Errorf("%q: %q without a version: write it joined, e.g. %s4459.2.0", text, op, op)
		}
		rel, err := release(strings.TrimPrefix(f, op), true)
		if err != nil {
			return Rule{}, fmt.Errorf("%q: %w", text, err)
		}
		r.cmps = append(r.cmps, comparator{op: op, release: rel})
	}
	return r, nil
}

// release reads major.minor.patch of v; strict refuses anything after them (a range's bound), else
// build metadata after "+" or "-" is left out (a version being judged).
func release(v string, strict bool) ([3]uint64, error) {
	var out [3]uint64
	core := v
	if i := strings.IndexAny(v, "+-"); i >= 0 {
		if strict {
			return out, fmt.Errorf("bound %q: a range's bound is a release, major.minor.patch, without build metadata", v)
		}
		core = v[:i]
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return out, fmt.Errorf("%q is not major.minor.patch", v)
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return out, fmt.Errorf("%q: part %q is not a number", v, p)
		}
		out[i] = n
	}
	return out, nil
}

func compare(a, b [3]uint64) int {
	for i := range a {
		switch {
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
	return 0
}

// Matches reports whether version v is in the rule. A version that is not major.minor.patch(+build)
// is in no range (only an exact rule can name it).
func (r Rule) Matches(v string) bool {
	if r.exact != "" {
		return protocol.NormalVersion(v) == r.exact
	}
	if len(r.cmps) == 0 {
		return false // never made by Parse: a rule of nothing matches nothing
	}
	rel, err := release(v, false)
	if err != nil {
		return false
	}
	for _, c := range r.cmps {
		d := compare(rel, c.release)
		ok := false
		switch c.op {
		case ">=":
			ok = d >= 0
		case ">":
			ok = d > 0
		case "<=":
			ok = d <= 0
		case "<":
			ok = d < 0
		case "=":
			ok = d == 0
		}
		if !ok {
			return false
		}
	}
	return true
}

// Rules are a pool's version rules.
type Rules struct {
	Allow []Rule // empty: any version not denied
	Deny  []Rule
	// MinAge: a version may be rebooted into only this long after the fleet first saw it staged.
	MinAge time.Duration
}

// Compile parses the lists; errors name the list and the entry.
func Compile(allow, deny []string, minAge time.Duration) (Rules, error) {
	if minAge < 0 {
		return Rules{}, fmt.Errorf("minAge %s must not be negative", minAge)
	}
	out := Rules{MinAge: minAge}
	for _, l := range []struct {
		name string
		in   []string
		dst  *[]Rule
	}{{"allow", allow, &out.Allow}, {"deny", deny, &out.Deny}} {
		for i, s := range l.in {
			r, err := Parse(s)
			if err != nil {
				return Rules{}, fmt.Errorf("%s[%d]: %w", l.name, i, err)
			}
			*l.dst = append(*l.dst, r)
		}
	}
	return out, nil
}

// Empty reports whether the rules allow every version at once.
func (r Rules) Empty() bool { return len(r.Allow) == 0 && len(r.Deny) == 0 && r.MinAge == 0 }

// Verdict is what the rules say of one version now.
type Verdict struct {
	Allowed bool
	// Reason says why not, in the words blocked-by carries after "version: <v> ": "denied by
	// >=4500.0.0", "not allowed (allow: >=4459.2.0 <4500.0.0)", "allowed from 2026-12-03T10:00:00Z
	// (minAge 72h0m0s)". Rule is "deny", "allow" or "minAge" (the metric's reason).
	Reason, Rule string
	// Matched: the deny rule that matched, or the allow list it is not in (comma-separated).
	Matched string
	// Until: when only time holds it (minAge), the moment it is allowed; zero otherwise.
	Until time.Time
}

// Decide judges version v, which the fleet first saw staged at firstSeen (zero: now, the first time),
// at now. Deny wins over allow; minAge applies to what the lists let through.
func (r Rules) Decide(v string, firstSeen, now time.Time) Verdict {
	_, notRelease := release(v, false)
	for _, d := range r.Deny {
		if d.Matches(v) {
			return Verdict{Reason: "denied by " + d.String(), Rule: "deny", Matched: d.String()}
		}
		if notRelease != nil && d.exact == "" {
			// A deny range cannot clear what it cannot compare: held rather than let through.
			return Verdict{Reason: "not a major.minor.patch release, so deny range " + d.String() + " cannot clear it", Rule: "deny", Matched: d.String()}
		}
	}
	if len(r.Allow) > 0 {
		in := false
		names := make([]string, 0, len(r.Allow))
		for _, a := range r.Allow {
			in = in || a.Matches(v)
			names = append(names, a.String())
		}
		if !in {
			list := strings.Join(names, ", ")
			return Verdict{Reason: "not allowed (allow: " + list + ")", Rule: "allow", Matched: list}
		}
	}
	if r.MinAge > 0 {
		if firstSeen.IsZero() {
			firstSeen = now
		}
		if from := firstSeen.Add(r.MinAge); now.Before(from) {
			return Verdict{Reason: fmt.Sprintf("allowed from %s (minAge %s)", from.UTC().Format(time.RFC3339), r.MinAge), Rule: "minAge", Until: from}
		}
	}
	return Verdict{Allowed: true}
}
