package history

import (
	"bytes"
	"fmt"
	"html"
	"sort"
	"time"
)

// Picture is what a timeline shows besides the cycles: the span of time, the fleet's budget (0:
// unknown) and when new cycles could start (nil: always).
type Picture struct {
	From, To time.Time
	Limit    int
	Open     func(time.Time) bool
	Location *time.Location // times are labelled in it (nil: UTC)
}

// Layout of the timeline, in SVG user units.
const (
	svgWidth   = 1000
	labelWidth = 150
	laneHeight = 16
	topMargin  = 30
	budgetH    = 60
)

// Colours of the phases and results (the legend says which is which).
var phaseColour = map[string]string{
	"wait": "#d9d9d9", "drain": "#f0a030", "reboot": "#3c78d8",
	Failed: "#cc0000", Undrainable: "#cc0000", Aborted: "#999999", Replaced: "#999999",
}

// SVG draws cycles as a timeline: one lane per node (in the order they started), its wait (asked to
// admitted), drain (drain start to reboot-ok) and reboot (reboot-ok to its end) as bars, the end
// coloured by its result; below, how many nodes were in their cycle at each moment against the budget;
// closed windows shaded. The output is deterministic for the same input.
func SVG(cycles []Cycle, p Picture) []byte {
	loc := p.Location
	if loc == nil {
		loc = time.UTC
	}
	if !p.To.After(p.From) {
		p.To = p.From.Add(time.Hour)
	}
	lanes := []string{}
	lane := map[string]int{}
	sorted := append([]Cycle(nil), cycles...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Start().Before(sorted[j].Start()) })
	for _, c := range sorted {
		if _, ok := lane[c.Node]; !ok {
			lane[c.Node] = len(lanes)
			lanes = append(lanes, c.Node)
		}
	}
	span := p.To.Sub(p.From)
	x := func(t time.Time) float64 {
		if t.Before(p.From) {
			t = p.From
		}
		if t.After(p.To) {
			t = p.To
		}
		return labelWidth + float64(t.Sub(p.From))/float64(span)*(svgWidth-labelWidth-10)
	}
	lanesH := len(lanes) * laneHeight
	height := topMargin + lanesH + 20 + budgetH + 40
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<title>Slipway roll-out %s to %s</title>`+"\n", p.From.In(loc).Format("2006-01-02 15:04"), p.To.In(loc).Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgWidth, height)
	// Closed windows: shaded, sampled every span/200.
	if p.Open != nil {
		step := span / 200
		var closedFrom time.Time
		for t := p.From; !t.After(p.To); t = t.Add(step) {
			open := p.Open(t)
			switch {
			case !open && closedFrom.IsZero():
				closedFrom = t
			case open && !closedFrom.IsZero():
				shade(&b, x(closedFrom), x(t), height-30)
				closedFrom = time.Time{}
			}
		}
		if !closedFrom.IsZero() {
			shade(&b, x(closedFrom), x(p.To), height-30)
		}
	}
	// Time axis: six ticks, to the second for a short roll-out.
	layout := "Mon 15:04"
	if span < 30*time.Minute {
		layout = "15:04:05"
	}
	for i := 0; i <= 6; i++ {
		t := p.From.Add(span * time.Duration(i) / 6)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eeeeee"/>`+"\n", x(t), topMargin-5, x(t), height-30)
		anchor := "middle"
		if i == 6 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s">%s</text>`+"\n", x(t), topMargin-10, anchor, t.In(loc).Format(layout))
	}
	for i, name := range lanes {
		y := topMargin + i*laneHeight
		fmt.Fprintf(&b, `<text x="4" y="%d">%s</text>`+"\n", y+laneHeight-4, html.EscapeString(name))
	}
	for _, c := range sorted {
		y := topMargin + lane[c.Node]*laneHeight + 2
		bar := func(from, to time.Time, colour, what string) {
			if from.IsZero() || to.IsZero() || !to.After(from) {
				return
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: %s to %s</title></rect>`+"\n",
				x(from), y, max(x(to)-x(from), 1), laneHeight-4, colour, html.EscapeString(c.Node), what,
				from.In(loc).Format("15:04:05"), to.In(loc).Format("15:04:05"))
		}
		drainStart := c.Drained
		if drainStart.IsZero() {
			drainStart = c.Admitted
		}
		bar(c.Asked, c.Admitted, phaseColour["wait"], "waiting")
		bar(drainStart, c.Granted, phaseColour["drain"], "draining")
		end := phaseColour["reboot"]
		if col, ok := phaseColour[c.Result]; ok {
			end = col
		}
		if c.Granted.IsZero() {
			bar(drainStart, c.Ended, end, c.Result)
		} else {
			bar(c.Granted, c.Ended, end, "rebooting, "+c.Result)
		}
	}
	// In their cycle at each moment, against the budget.
	base := topMargin + lanesH + 20 + budgetH
	peak := p.Limit
	type edge struct {
		t time.Time
		d int
	}
	var edges []edge
	for _, c := range sorted {
		start := c.Admitted
		if start.IsZero() {
			start = c.Start()
		}
		edges = append(edges, edge{start, 1}, edge{c.Ended, -1})
	}
	sort.SliceStable(edges, func(i, j int) bool {
		if !edges[i].t.Equal(edges[j].t) {
			return edges[i].t.Before(edges[j].t)
		}
		return edges[i].d < edges[j].d
	})
	n := 0
	for _, e := range edges {
		n += e.d
		peak = max(peak, n)
	}
	peak = max(peak, 1)
	yOf := func(v int) float64 { return float64(base) - float64(v)/float64(peak)*budgetH }
	path := fmt.Sprintf("M%.1f %.1f", x(p.From), yOf(0))
	n = 0
	for _, e := range edges {
		path += fmt.Sprintf(" H%.1f", x(e.t))
		n += e.d
		path += fmt.Sprintf(" V%.1f", yOf(n))
	}
	path += fmt.Sprintf(" H%.1f", x(p.To))
	fmt.Fprintf(&b, `<text x="4" y="%d">in cycle</text>`+"\n", base-budgetH/2)
	fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="#3c78d8" stroke-width="1.5"/>`+"\n", path)
	if p.Limit > 0 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#cc0000" stroke-dasharray="4 3"/>`+"\n", x(p.From), yOf(p.Limit), x(p.To), yOf(p.Limit))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#cc0000">budget %d</text>`+"\n", x(p.To)-60, yOf(p.Limit)-3, p.Limit)
	}
	// Legend.
	lx := labelWidth
	for _, k := range []struct{ name, colour string }{{"waiting", phaseColour["wait"]}, {"draining", phaseColour["drain"]},
		{"rebooting", phaseColour["reboot"]}, {"failed", phaseColour[Failed]}, {"aborted or replaced", phaseColour[Aborted]}, {"windows closed", "#f4f4f4"}} {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s" stroke="#bbbbbb"/><text x="%d" y="%d">%s</text>`+"\n", lx, height-20, k.colour, lx+14, height-11, k.name)
		lx += 30 + 7*len(k.name)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func shade(b *bytes.Buffer, x1, x2 float64, bottom int) {
	fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#f4f4f4"/>`+"\n", x1, topMargin-5, max(x2-x1, 0), bottom-topMargin+5)
}
