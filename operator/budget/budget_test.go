package budget

import (
	"reflect"
	"testing"
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
