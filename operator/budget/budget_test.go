package budget

import (
	"reflect"
	"testing"
	"time"
)

func TestParseMaxAndLimit(t *testing.T) {
	cases := []struct {
		in    string
		total int
		limit int
	}{
		{"1", 10, 1}, {"3", 10, 3}, {"3", 2, 3}, {"25%", 10, 2}, {"25%", 3, 1}, {"50%", 5, 2},
		{"100%", 7, 7}, {" 2 ", 5, 2}, {"10%", 0, 1},
	}
	for _, c := range cases {
		m, err := ParseMax(c.in)
		if err != nil {
			t.Fatalf("ParseMax(%q): %v", c.in, err)
		}
		if got := m.Limit(c.total); got != c.limit {
			t.Errorf("ParseMax(%q).Limit(%d) = %d, want %d", c.in, c.total, got, c.limit)
		}
	}
	for _, bad := range []string{"", "0", "-1", "0%", "101%", "abc", "1.5", "%"} {
		if _, err := ParseMax(bad); err == nil {
			t.Errorf("ParseMax(%q) accepted", bad)
		}
	}
}

func TestAdmit(t *testing.T) {
	c := func(name string, unavail bool) Candidate { return Candidate{Name: name, Unavailable: unavail} }
	cases := []struct {
		name        string
		limit, busy int
		cands       []Candidate
		want        []string
	}{
		{"empty budget admits up to the limit in name order", 3, 0, []Candidate{c("d", false), c("a", false), c("c", false), c("b", false)}, []string{"a", "b", "c"}},
		{"budget partly used", 3, 2, []Candidate{c("b", false), c("a", false)}, []string{"a"}},
		{"budget full", 1, 1, []Candidate{c("a", false)}, nil},
		{"already unavailable nodes cost nothing and go first", 2, 1, []Candidate{c("a", false), c("z", true)}, []string{"z", "a"}},
		{"over budget admits nobody, not even free ones", 1, 3, []Candidate{c("z", true), c("a", false)}, nil},
	}
	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			if got := Admit(k.limit, k.busy, k.cands); !reflect.DeepEqual(got, k.want) {
				t.Errorf("Admit(%d, %d, %v) = %v, want %v", k.limit, k.busy, k.cands, got, k.want)
			}
		})
	}
}

// Admitting never takes the number of unavailable nodes above the limit, for any mix.
func TestAdmitNeverExceeds(t *testing.T) {
	for limit := 1; limit <= 4; limit++ {
		for busy := 0; busy <= 5; busy++ {
			for mask := 0; mask < 1<<5; mask++ {
				var cands []Candidate
				for i := 0; i < 5; i++ {
					cands = append(cands, Candidate{Name: string(rune('a' + i)), Unavailable: mask&(1<<i) != 0})
				}
				admitted := Admit(limit, busy, cands)
				after := busy
				for _, a := range admitted {
					if !cands[a[0]-'a'].Unavailable {
						after++
					}
				}
				if len(admitted) > 0 && after > limit {
					t.Fatalf("limit %d busy %d mask %b: admitted %v, %d unavailable", limit, busy, mask, admitted, after)
				}
			}
		}
	}
}

// Known answers for pools: two zones with a budget of 1 each and a global budget of 2.
func TestAdmitPools(t *testing.T) {
	z := func(name, zone string, unavail bool) Candidate {
		return Candidate{Name: name, Pools: []string{"group/" + zone}, Unavailable: unavail}
	}
	pools := func(global, a, b, usedA, usedB int) map[string]Usage {
		return map[string]Usage{Global: {Limit: global, Used: usedA + usedB}, "group/a": {Limit: a, Used: usedA}, "group/b": {Limit: b, Used: usedB}}
	}
	cases := []struct {
		name  string
		pools map[string]Usage
		cands []Candidate
		skip  string
		want  []string
	}{
		{"one per zone at once", pools(2, 1, 1, 0, 0), []Candidate{z("a1", "a", false), z("a2", "a", false), z("b1", "b", false)}, "", []string{"a1", "b1"}},
		{"global limit binds first", pools(1, 1, 1, 0, 0), []Candidate{z("a1", "a", false), z("b1", "b", false)}, "", []string{"a1"}},
		{"a NotReady node holds its zone only", pools(2, 1, 1, 1, 0), []Candidate{z("a1", "a", false), z("b1", "b", false)}, "", []string{"b1"}},
		{"already unavailable in a full zone costs nothing", pools(3, 1, 1, 1, 0), []Candidate{z("a0", "a", true), z("a1", "a", false)}, "", []string{"a0"}},
		{"a skipped node leaves its slot to the next", pools(2, 2, 1, 0, 0), []Candidate{z("a1", "a", false), z("a2", "a", false), z("a3", "a", false)}, "a1", []string{"a2", "a3"}},
		{"rank before everything", pools(1, 1, 1, 0, 0), []Candidate{z("a1", "a", false), {Name: "cp", Pools: []string{"control-plane"}, Rank: -1}}, "", []string{"cp"}},
		{"unknown pool does not limit", map[string]Usage{Global: {Limit: 2}}, []Candidate{z("a1", "a", false), z("a2", "a", false)}, "", []string{"a1", "a2"}},
	}
	for _, k := range cases {
		var skip func(string) bool
		if k.skip != "" {
			skip = func(n string) bool { return n == k.skip }
		}
		if got := AdmitPools(k.pools, k.cands, skip); !reflect.DeepEqual(got, k.want) {
			t.Errorf("%s: got %v, want %v", k.name, got, k.want)
		}
	}
}

// For every mix of zones, availability and limits, no pool ends above its limit.
func TestAdmitPoolsNeverExceeds(t *testing.T) {
	for mask := 0; mask < 1<<6; mask++ {
		for zones := 0; zones < 1<<6; zones++ {
			for _, lim := range [][3]int{{1, 1, 1}, {2, 1, 1}, {3, 2, 1}, {4, 1, 2}} {
				pools := map[string]Usage{Global: {Limit: lim[0]}, "a": {Limit: lim[1]}, "b": {Limit: lim[2]}}
				var cands []Candidate
				for i := 0; i < 6; i++ {
					zone := "a"
					if zones&(1<<i) != 0 {
						zone = "b"
					}
					cands = append(cands, Candidate{Name: string(rune('a' + i)), Pools: []string{zone}, Unavailable: mask&(1<<i) != 0})
				}
				// Already-unavailable candidates count in their pools to begin with.
				for _, c := range cands {
					if c.Unavailable {
						for _, k := range []string{Global, c.Pools[0]} {
							p := pools[k]
							p.Used++
							pools[k] = p
						}
					}
				}
				after := map[string]int{}
				for k, p := range pools {
					after[k] = p.Used
				}
				admitted := AdmitPools(pools, cands, nil)
				for _, a := range admitted {
					c := cands[a[0]-'a']
					if !c.Unavailable {
						after[Global]++
						after[c.Pools[0]]++
					}
				}
				for k, p := range pools {
					if after[k] > p.Limit && after[k] > p.Used {
						t.Fatalf("mask %b zones %b limits %v: admitted %v, pool %q at %d > %d", mask, zones, lim, admitted, k, after[k], p.Limit)
					}
				}
			}
		}
	}
}

// The longest-waiting node goes first among equals; unknown waits (zero) count as longest.
func TestOrderLongestWaitingFirst(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	c := []Candidate{
		{Name: "a", Since: t0.Add(2 * time.Minute)},
		{Name: "z", Since: t0},
		{Name: "m", Since: t0.Add(time.Minute)},
		{Name: "b", Since: t0.Add(2 * time.Minute)},
	}
	if got := Admit(2, 0, c); !reflect.DeepEqual(got, []string{"z", "m"}) {
		t.Errorf("admitted %v, want the two longest waiting [z m]", got)
	}
	Order(c)
	var names []string
	for _, x := range c {
		names = append(names, x.Name)
	}
	if !reflect.DeepEqual(names, []string{"z", "m", "a", "b"}) {
		t.Errorf("order %v", names)
	}
}
