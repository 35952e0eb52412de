// Package budget is the arithmetic of how many nodes may be unavailable at once: parsing
// --max-unavailable and choosing which waiting nodes may start a cycle now. It is pure.
package budget

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Max is a maximum number of unavailable nodes: a count, or a percentage of all nodes.
type Max struct {
	n       int
	percent bool
}

// ParseMax reads "3" or "25%". Zero is refused: a budget of nothing would silently stop every update;
// use reboot-paused or stop the operator for that.
func ParseMax(s string) (Max, error) {
	s = strings.TrimSpace(s)
	pct := strings.HasSuffix(s, "%")
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil {
		return Max{}, fmt.Errorf("max-unavailable %q: want a positive count like 2 or a percentage like 25%%", s)
	}
	if n < 1 || (pct && n > 100) {
		return Max{}, fmt.Errorf("max-unavailable %q: must be at least 1 (and at most 100%%)", s)
	}
	return Max{n: n, percent: pct}, nil
}

// Limit is the number of nodes out of total that may be unavailable. Percentages round down, like a
// Deployment's maxUnavailable, but never below 1 so that a small fleet still makes progress.
func (m Max) Limit(total int) int {
	if !m.percent {
		return m.n
	}
	l := int(math.Floor(float64(total) * float64(m.n) / 100))
	if l < 1 {
		l = 1
	}
	return l
}

func (m Max) String() string {
	if m.percent {
		return fmt.Sprintf("%d%%", m.n)
	}
	return strconv.Itoa(m.n)
}

// Candidate is a node waiting to start a cycle.
type Candidate struct {
	Name string
	// Unavailable: the node already counts against the budget (NotReady or cordoned), so admitting
	// it costs nothing.
	Unavailable bool
	// Pools the node counts in besides the global one (its group, the control plane).
	Pools []string
	// Rank orders candidates before everything else: lower goes first (e.g. workers before the
	// control plane).
	Rank int
	// Since is when the node was first seen waiting (zero: unknown). Among equals the longest
	// waiting goes first, so a fleet whose nodes keep asking cannot starve the ones late in the
	// alphabet.
	Since time.Time
}

// Order sorts candidates in the documented admission order: by Rank, then nodes that are already
// unavailable first (rebooting them does not reduce capacity further), then the longest waiting,
// then by name.
func Order(c []Candidate) {
	sort.SliceStable(c, func(i, j int) bool {
		if c[i].Rank != c[j].Rank {
			return c[i].Rank < c[j].Rank
		}
		if c[i].Unavailable != c[j].Unavailable {
			return c[i].Unavailable
		}
		if !c[i].Since.Equal(c[j].Since) {
			return c[i].Since.Before(c[j].Since)
		}
		return c[i].Name < c[j].Name
	})
}

// Usage is one budget: at most Limit of its nodes may count against it; Used do now.
type Usage struct{ Limit, Used int }

// Global is the key of the pool every node is in (--max-unavailable).
const Global = ""

// Admit returns the candidates (in Order) that may start now: each one admitted keeps the number of
// unavailable nodes at or below limit. unavailable is how many nodes count against the budget already.
func Admit(limit, unavailable int, candidates []Candidate) []string {
	return AdmitPools(map[string]Usage{Global: {Limit: limit, Used: unavailable}}, candidates, nil)
}

// AdmitPools returns the candidates (in Order) that may start now: each one admitted keeps every pool
// it is in -- the global one and its Pools -- at or below its limit. A pool a candidate names that is
// not in pools does not limit it. skip, if not nil, is asked about each candidate the budget would
// admit, in order; a skipped candidate is not admitted and uses nothing (a blocker holds it).
func AdmitPools(pools map[string]Usage, candidates []Candidate, skip func(name string) bool) []string {
	used := make(map[string]int, len(pools))
	for k, p := range pools {
		used[k] = p.Used
	}
	c := append([]Candidate(nil), candidates...)
	Order(c)
	var out []string
	for _, x := range c {
		cost := 1
		if x.Unavailable {
			cost = 0
		}
		in := append([]string{Global}, x.Pools...)
		fits := true
		for _, k := range in {
			if p, ok := pools[k]; ok && used[k]+cost > p.Limit {
				fits = false
			}
		}
		if !fits || (skip != nil && skip(x.Name)) {
			continue
		}
		for _, k := range in {
			if _, ok := pools[k]; ok {
				used[k] += cost
			}
		}
		out = append(out, x.Name)
	}
	return out
}
