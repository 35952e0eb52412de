package versions

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "empty rule"},
		{"   ", "empty rule"},
		{"4459.2.1 4459.2.2", "one version per rule"},
		{">= 4459.2.0", "without a version"},
		{">=4459.2", "not major.minor.patch"},
		{">=4459.2.x", "not a number"},
		{">=4459.2.0+dev", "without build metadata"},
		{"~4459.2.0", "character"},
		{"4459.2.1 <4500.0.0", "has no comparator"},
		{strings.Repeat("1", 300), "at most 256"},
		{"+", "names no version"},
		{"._-", "names no version"},
	} {
		if _, err := Parse(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q): %v, want an error saying %q", c.in, err, c.want)
		}
	}
	if _, err := Compile([]string{">=1.0.0"}, []string{"oops version"}, 0); err == nil || !strings.Contains(err.Error(), "deny[0]") {
		t.Errorf("Compile names the list and entry: %v", err)
	}
	if _, err := Compile(nil, nil, -time.Hour); err == nil {
		t.Error("a negative minAge compiled")
	}
}

func TestMatches(t *testing.T) {
	for _, c := range []struct {
		rule, v string
		want    bool
	}{
		{"4459.2.1", "4459.2.1", true},
		{"4459.2.1", "4459.2.2", false},
		{"4459.2.1", "4459.2.1+dev-1", false},      // exact is exact
		{"4459.2.1+dev-1", "4459.2.1-dev-1", true}, // the label's sanitized form is the same version
		{">=4459.2.0 <4500.0.0", "4459.2.0", true},
		{">=4459.2.0 <4500.0.0", "4459.2.1+dev-1", true}, // build metadata left out of a range
		{">=4459.2.0 <4500.0.0", "4500.0.0", false},
		{">=4459.2.0 <4500.0.0", "4459.1.9", false},
		{">=4459.2.0 <4500.0.0", "4460.0.0", true},
		{">4459.2.0", "4459.2.0", false},
		{"<=4459.2.0", "4459.2.0", true},
		{"=4459.2.0", "4459.2.0+x", true},
		{">=100.0.0", "99.999.999", false}, // numbers as numbers, not text
		{">=0.0.0", "weird", false},        // not a release: in no range
		{">=4459.2.0", "", false},
	} {
		r, err := Parse(c.rule)
		if err != nil {
			t.Fatalf("%q: %v", c.rule, err)
		}
		if got := r.Matches(c.v); got != c.want {
			t.Errorf("%q matches %q: %v, want %v", c.rule, c.v, got, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	rules, err := Compile([]string{">=4459.2.0 <4500.0.0"}, []string{"4459.2.3"}, 72*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v         string
		firstSeen time.Time
		allowed   bool
		reason    string
		rule      string
	}{
		{"4459.2.3", t0.Add(-1000 * time.Hour), false, "denied by 4459.2.3", "deny"},
		{"4500.0.0", t0.Add(-1000 * time.Hour), false, "not allowed (allow: >=4459.2.0 <4500.0.0)", "allow"},
		{"4459.2.1", t0.Add(-24 * time.Hour), false, "allowed from 2026-11-29T10:00:00Z (minAge 72h0m0s)", "minAge"},
		{"4459.2.1", time.Time{}, false, "allowed from 2026-11-30T10:00:00Z (minAge 72h0m0s)", "minAge"},
		{"4459.2.1", t0.Add(-72 * time.Hour), true, "", ""},
		{"4460.0", t0.Add(-1000 * time.Hour), false, "not allowed (allow: >=4459.2.0 <4500.0.0)", "allow"},
	} {
		got := rules.Decide(c.v, c.firstSeen, t0)
		if got.Allowed != c.allowed || got.Reason != c.reason || got.Rule != c.rule {
			t.Errorf("%s first seen %s: %+v, want allowed %v %q (%s)", c.v, c.firstSeen, got, c.allowed, c.reason, c.rule)
		}
		if got.Rule == "minAge" && got.Until.IsZero() {
			t.Errorf("%s: held by minAge with no time it ends", c.v)
		}
	}
	if !(Rules{}).Decide("anything", time.Time{}, t0).Allowed || !(Rules{}).Empty() {
		t.Error("no rules hold a version")
	}
}

// Properties over random versions and rules: deny always wins; what is allowed stays allowed as time
// passes (minAge only ever ends); Until is exactly when it turns.
func TestDecideProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	ver := func() string { return fmt.Sprintf("%d.%d.%d", 4400+rng.Intn(100), rng.Intn(4), rng.Intn(4)) }
	for i := 0; i < 2000; i++ {
		deny := []string{ver(), ">=" + ver()}
		allow := []string{">=" + ver() + " <" + ver()}
		rules, err := Compile(allow, deny, time.Duration(rng.Intn(100))*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		v := ver()
		seen := t0.Add(-time.Duration(rng.Intn(100)) * time.Hour)
		d := rules.Decide(v, seen, t0)
		for _, r := range rules.Deny {
			if r.Matches(v) && d.Allowed {
				t.Fatalf("%s allowed though %q denies it", v, r)
			}
		}
		later := rules.Decide(v, seen, t0.Add(time.Duration(rng.Intn(200))*time.Hour))
		if d.Allowed && !later.Allowed {
			t.Fatalf("%s allowed at %s and not later: %+v", v, t0, later)
		}
		if d.Rule == "minAge" {
			if rules.Decide(v, seen, d.Until.Add(-time.Nanosecond)).Allowed || !rules.Decide(v, seen, d.Until).Allowed {
				t.Fatalf("%s: held until %s, but the verdict turns at another time", v, d.Until)
			}
		}
	}
}

// A deny range fails closed: a version it cannot compare (not major.minor.patch) is held by it.
func TestDenyRangeFailsClosed(t *testing.T) {
	rules, err := Compile(nil, []string{">=4600.0.0"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"4600.0", "4600.0.0.1", "99999999999.0.0"} {
		if d := rules.Decide(v, time.Time{}, t0); d.Allowed || d.Rule != "deny" {
			t.Errorf("%s escaped the deny range: %+v", v, d)
		}
	}
	exact, _ := Compile(nil, []string{"4600.0.1"}, 0)
	if d := exact.Decide("4600.0", time.Time{}, t0); !d.Allowed {
		t.Errorf("an exact deny held another version: %+v", d)
	}
}
