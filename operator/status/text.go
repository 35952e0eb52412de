package status

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
)

// DefaultWidth is the line length the text output fits when $COLUMNS does not say.
const DefaultWidth = 100

const (
	pad    = 2
	minCut = 24 // the DETAIL column is never cut shorter than this
	// maxProblemLines: text output lists this many problems, then says how many more (-o wide: all).
	maxProblemLines = 8
	ellipsis        = "..."
)

// WriteJSON writes the report as the documented JSON shape, indented, with a final newline.
func WriteJSON(w io.Writer, r Report) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// TextOptions shape the text output.
type TextOptions struct {
	// Width: lines of the node table stay within it by cutting its last column (DETAIL, free text);
	// 0 never cuts (-o wide).
	Width int
	// Location: the zone absolute times are shown in (nil: UTC).
	Location *time.Location
	// All: list idle nodes one row each too (otherwise one line counts them).
	All bool
}

// WriteText writes the report for a terminal: the fleet, the budgets, then one row per node.
func WriteText(w io.Writer, r Report, o TextOptions) error {
	now := r.Time
	if o.Location != nil {
		now = now.In(o.Location)
	}
	tw := tabwriter.NewWriter(w, 0, 8, pad, ' ', 0)
	// section writes key and its first line, then the other lines under it. Free text goes on one
	// line: a newline or tab in a reason must not break the columns.
	section := func(key string, lines ...string) {
		for i, l := range lines {
			if i > 0 {
				key = ""
			}
			fmt.Fprintf(tw, "%s\t%s\n", key, oneLine(l))
		}
	}

	f := r.Fleet
	probs := []string{"none"}
	if len(f.Problems) > 0 {
		probs = nil
	}
	for i, p := range f.Problems {
		if o.Width > 0 && i == maxProblemLines && len(f.Problems) > maxProblemLines+1 {
			probs = append(probs, fmt.Sprintf("and %d more: -o wide lists them all", len(f.Problems)-i))
			break
		}
		l := p.What
		if p.Node != "" {
			l = p.Node + ": " + l
		}
		if p.Do != "" {
			l += " -> " + p.Do
		}
		if o.Width > 0 {
			// Wrapped, never cut: the part that says what to do comes last.
			probs = append(probs, wrap(oneLine(l), max(o.Width-len("Problems:")-pad, minCut), "  ")...)
			continue
		}
		probs = append(probs, l)
	}
	section("Problems:", probs...)
	if p := f.Paused; p.Paused {
		by := ""
		if p.By != "" {
			by = " by " + p.By
		}
		if p.At != nil {
			by += " " + ago(now, *p.At) + " ago"
		}
		section("Fleet:", fmt.Sprintf("PAUSED%s: %s", by, orUnsaid(p.Reason)))
	} else if !f.FailedReboots.Paused {
		section("Fleet:", "running")
	}
	if fr := f.FailedReboots; fr.Paused {
		section("Fleet:", fmt.Sprintf("PAUSED by the failure budget: %s (undo: resume --failures)", orUnsaid(fr.Reason)))
	}
	var groups []string
	for _, g := range f.PausedGroups {
		groups = append(groups, fmt.Sprintf("%s PAUSED: %s", g.Group, orUnsaid(g.Reason)))
	}
	section("Groups:", groups...)
	var pols []string
	for _, p := range f.Policies {
		l := fmt.Sprintf("%s (priority %d): %d node(s), window %s", p.Name, p.Priority, p.Nodes, p.Window)
		switch {
		case p.Error != "":
			l += ": " + p.Error
		case p.Paused:
			l += ": " + orUnsaid(p.Reason) + " (undo: resume --policy " + p.Name + ")"
		case p.NextOpen != nil:
			l += " until " + clock(now, *p.NextOpen)
		}
		pols = append(pols, l)
	}
	section("Policies:", pols...)
	section("Nodes:", nodesLine(r.Nodes))
	windows := []string{scheduleLine(f.Schedule, now)}
	for _, s := range f.Schedule.Windows {
		windows = append(windows, "window "+s)
	}
	for _, s := range f.Schedule.Exclusions {
		windows = append(windows, "exclusion "+s)
	}
	section("Windows:", windows...)
	blockers := []string{"none"}
	if len(f.Blockers) > 0 {
		blockers = nil
	}
	for _, b := range f.Blockers {
		blockers = append(blockers, fmt.Sprintf("%s: %s (for %s)", b.Name, b.Reason, ago(now, b.Since)))
	}
	section("Blockers:", blockers...)
	section("Failed:", failedLine(f.FailedReboots))
	var vs []string
	for _, v := range f.Versions {
		vs = append(vs, versionLine(v, now))
	}
	section("Versions:", vs...)
	if f.Published {
		section("Cycles:", cyclesLine(f))
	}
	opVersion := ""
	if f.OperatorVersion != "" {
		opVersion = " (" + f.OperatorVersion + ")"
	}
	switch l := f.Lease; {
	case l != nil && l.Live:
		section("Operator:", fmt.Sprintf("leader %s%s, lease renewed %s ago", orDash(l.Holder), opVersion, agoPtr(now, l.Renewed)))
	case l != nil:
		section("Operator:", fmt.Sprintf("NO LEADER: the lease of %s was last renewed %s ago", orDash(l.Holder), agoPtr(now, l.Renewed)))
	case f.Published:
		section("Operator:", "leader "+orDash(f.Leader)+opVersion+" (as last published; its Lease was not read)")
	}
	if !f.Published {
		section("Operator:", fmt.Sprintf("no status in %s/%s: limits and windows unknown (is -n right?)", r.Namespace, fleetswitch.ConfigMapName))
	}
	fmt.Fprintln(tw)

	fmt.Fprintln(tw, "BUDGET\tUNAVAILABLE\tLIMIT\tNODES")
	for _, b := range f.Budgets {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", oneLine(budgetName(b)), b.Unavailable, limitCell(b, f.Published), b.Nodes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return writeNodes(w, r, o)
}

// wrap breaks s into lines of at most n runes at spaces (a word longer than n stands alone), the
// lines after the first indented.
func wrap(s string, n int, indent string) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= n:
			line += " " + word
		default:
			lines = append(lines, line)
			line = indent + word
		}
	}
	return append(lines, line)
}

// rank orders the node table for a person on call: nodes with something to look at first (stalled,
// no agent, a failed drain, down without a cycle of Slipway's), then those in their cycle, then the
// waiting ones in the order they will go, then the idle ones.
func rank(n Node) int {
	switch {
	case n.Stalled != "" || n.NoAgent || n.Undrainable != "" && n.State == protocol.NeedsReboot || n.Unavailable && !n.State.InCycle():
		return 0
	case n.State.InCycle():
		return 1
	case n.State == protocol.NeedsReboot:
		return 2
	}
	return 3
}

// writeNodes writes one row per node. What explains a node (why it waits, why it is stalled, its
// last error) shares the last column, the only one that is cut to fit width (0: never cut).
func writeNodes(w io.Writer, r Report, o TextOptions) error {
	width := o.Width
	pools := len(r.Fleet.Policies) > 0 // the POLICY column only where there are pools
	head := []string{"NODE", "STATE", "FOR", "OS", "GROUP", "LAST-REBOOT", "DETAIL"}
	if pools {
		head = slices.Insert(head, 5, "POLICY")
	}
	// The CHANNEL column only where a pool declares one (spec.update, --update-group).
	channels := slices.ContainsFunc(r.Nodes, func(n Node) bool { return n.WantChannel != "" })
	if channels {
		head = slices.Insert(head, 4, "CHANNEL")
	}
	rows := [][]string{head}
	ordered := slices.Clone(r.Nodes)
	slices.SortStableFunc(ordered, func(a, b Node) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		if qa, qb := a.Queue, b.Queue; qa != qb && rank(a) == 2 {
			switch {
			case qa == 0:
				return 1
			case qb == 0:
				return -1
			}
			return qa - qb
		}
		return strings.Compare(a.Name, b.Name)
	})
	idle := 0
	for _, n := range ordered {
		if !o.All && rank(n) == 3 && detailCell(n, r.Time) == "" {
			idle++ // nothing to say about it: counted below
			continue
		}
		row := []string{
			n.Name,
			stateCell(n),
			agoPtr(r.Time, n.Since),
			orDash(n.OSVersion),
			orDash(n.Group),
			agoPtr(r.Time, n.LastReboot),
			orDash(detailCell(n, r.Time)),
		}
		if pools {
			pol := orDash(n.Policy)
			if n.PolicyTied != "" {
				pol = "TIED " + n.PolicyTied
			}
			row = slices.Insert(row, 5, pol)
		}
		if channels {
			row = slices.Insert(row, 4, channelCell(n))
		}
		rows = append(rows, row)
	}

	if width > 0 {
		fit(rows, width)
	}
	tw := tabwriter.NewWriter(w, 0, 8, pad, ' ', 0)
	for _, row := range rows {
		for i := range row {
			row[i] = oneLine(row[i]) // every cell may come from a Node: no tab, newline or escape
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if idle > 0 {
		_, err := fmt.Fprintf(w, "(%d idle nodes with nothing to say: --all lists them)\n", idle)
		return err
	}
	return nil
}

// fit cuts the last column of rows so that no line is longer than width, but never shorter than
// minCut: the other columns are short words, names and ages, kept whole.
func fit(rows [][]string, width int) {
	last := len(rows[0]) - 1
	widths := make([]int, last)
	for _, row := range rows {
		for i, c := range row[:last] {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	room := width
	for _, wd := range widths {
		room -= wd + pad
	}
	room = max(room, minCut)
	for _, row := range rows[1:] {
		row[last] = cut(row[last], room)
	}
}

func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-len(ellipsis)]) + ellipsis
}

// stateCell is the state and, outside a cycle (where they are expected), what else makes the node
// unavailable or holds it; reboot-paused always.
func stateCell(n Node) string {
	s := string(n.State)
	inCycle := n.State.InCycle()
	if n.Paused {
		s += ",paused"
	}
	if !inCycle && !n.Ready {
		s += ",not-ready"
	}
	if !inCycle && n.Unschedulable {
		s += ",cordoned"
	}
	return s
}

// detailCell is what explains the node: its place in the admission queue ("#2") and why it waits
// (blocked-by, "<kind>: <detail>"), why it is stalled or when it will be, that it has no agent, its
// last drain and reboot errors.
func detailCell(n Node, now time.Time) string {
	var parts []string
	switch {
	case n.Queue > 0 && n.BlockedBy != "":
		parts = append(parts, "#"+strconv.Itoa(n.Queue)+" "+oneLine(n.BlockedBy))
	case n.Queue > 0:
		parts = append(parts, "#"+strconv.Itoa(n.Queue))
	case n.BlockedBy != "":
		parts = append(parts, oneLine(n.BlockedBy))
	}
	if n.Stalled != "" {
		parts = append(parts, "stalled: "+n.Stalled)
	}
	if n.StallsAt != nil {
		if n.StallsAt.After(now) {
			parts = append(parts, "stalls in "+ago(*n.StallsAt, now))
		} else {
			parts = append(parts, "stalls now")
		}
	}
	if n.NoAgent {
		parts = append(parts, "no update-agent")
	}
	if n.DrainError != "" {
		parts = append(parts, "drain-error: "+oneLine(n.DrainError))
	}
	if n.RebootError != "" {
		parts = append(parts, "reboot-error: "+oneLine(n.RebootError))
	}
	if n.UpdateConfError != "" {
		parts = append(parts, "update.conf: "+oneLine(n.UpdateConfError))
	} else if n.WantServer != "" && n.Server != n.WantServer {
		parts = append(parts, "server "+oneLine(orDash(n.Server))+"→"+oneLine(n.WantServer))
	}
	return strings.Join(parts, "; ")
}

// channelCell is the update channel the node follows, "stable→beta" while its agent has not yet
// written the one its pool declares.
func channelCell(n Node) string {
	c := orDash(oneLine(n.Channel))
	if n.WantChannel != "" && n.WantChannel != n.Channel {
		return c + "→" + oneLine(n.WantChannel)
	}
	return c
}

// oneLine makes s safe to print on a terminal on one line: every run of white space becomes one space
// and every other control character (C0, DEL, C1 such as CSI) or bidirectional override becomes
// "?". Node annotations are written by agents and people; an escape sequence in one must not move the
// cursor, rewrite the screen or set the clipboard (OSC 52) of whoever runs kubectl slipway.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.IsSpace(r):
			return ' '
		case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r), r == utf8.RuneError:
			return '?'
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// stateOrder is the cycle's order, for the summary.
var stateOrder = []protocol.State{protocol.Idle, protocol.NeedsReboot, protocol.BeforeHooks, protocol.Draining,
	protocol.Rebooting, protocol.Rebooted, protocol.AfterHooks}

// nodesLine counts the nodes per state, then the stalled and paused ones: the table in one line, for
// fleets too big to read row by row.
func nodesLine(nodes []Node) string {
	count := map[protocol.State]int{}
	stalled, paused := 0, 0
	for _, n := range nodes {
		count[n.State]++
		if n.Stalled != "" {
			stalled++
		}
		if n.Paused {
			paused++
		}
	}
	parts := []string{}
	for _, s := range stateOrder {
		if count[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[s], s))
		}
	}
	for _, x := range []struct {
		n    int
		what string
	}{{stalled, "stalled"}, {paused, "paused"}} {
		if x.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", x.n, x.what))
		}
	}
	line := fmt.Sprintf("%d", len(nodes))
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	return line
}

func scheduleLine(s Schedule, now time.Time) string {
	switch {
	case !s.Known && len(s.Windows)+len(s.Exclusions) == 0:
		return "unknown (" + s.Error + ")"
	case !s.Known:
		return "unknown (" + s.Error + "); as given:"
	case s.Open && len(s.Windows)+len(s.Exclusions) == 0:
		return "open (no reboot window: always open)"
	case s.Open:
		return "open"
	case s.NextOpen == nil:
		return "CLOSED (" + s.ClosedBy + "), not opening within 400 days"
	}
	return fmt.Sprintf("CLOSED (%s), opens %s (in %s)", s.ClosedBy, clock(now, *s.NextOpen), ago(*s.NextOpen, now))
}

// versionLine: "4500.1.0: 3 on, 1 in cycle, 5 asking, 0 failed, ETA ~45m; canaries baking for 8m more".
func versionLine(v Version, now time.Time) string {
	l := fmt.Sprintf("%s: %d on, %d in cycle, %d asking, %d failed", v.Version, v.On, v.InCycle, v.Asking, v.Failed)
	switch {
	case v.ETASeconds != nil:
		l += ", ETA ~" + duration.HumanDuration(time.Duration(*v.ETASeconds)*time.Second)
	case v.InCycle+v.Asking > 0 && v.Canary != "halted":
		l += ", ETA unknown"
	}
	// A version nothing asks for and nothing is rebooting into (the one the nodes run): its canary
	// state would only say what would happen if a node asked, and that none proved it, which reads like
	// a problem with the version every node runs.
	canary := v.Canary
	if v.InCycle+v.Asking == 0 && (canary == "canaries" || canary == "waiting") {
		canary = ""
	}
	switch canary {
	case "":
	case "baking":
		l += "; canaries baking"
		if v.BakeEnd != nil {
			l += fmt.Sprintf(" for %s more", duration.HumanDuration(v.BakeEnd.Sub(now)))
		}
	case "halted":
		l += "; HALTED (undo: resume --version " + v.Version + ")"
	case "waiting":
		l += "; others wait for its canaries"
	case "canaries":
		l += "; canaries go"
	default:
		l += "; " + v.Canary
	}
	if canary != "" && canary != "released" && v.Unproven > 0 {
		// Nodes on it that Slipway never rebooted onto it: they release no canary hold.
		l += fmt.Sprintf(" (%d on it without a Slipway cycle: no proof)", v.Unproven)
	}
	return l
}

// cyclesLine: "median 14m (last 12 measured); --settle-time 5m0s; --reboot-timeout 30m0s".
func cyclesLine(f Fleet) string {
	l := "none measured yet"
	if c := f.Cycles; c.MedianSeconds != nil {
		l = fmt.Sprintf("median %s (last %d measured)", duration.HumanDuration(time.Duration(*c.MedianSeconds)*time.Second), c.Measured)
	}
	if f.SettleTime != "" {
		l += "; --settle-time " + f.SettleTime
	}
	if f.RebootTimeout != "" {
		l += "; --reboot-timeout " + f.RebootTimeout
	}
	return l
}

func failedLine(f FailedReboots) string {
	names := ""
	if len(f.Nodes) > 0 {
		names = ": " + strings.Join(f.Nodes, ", ")
	}
	if f.Max > 0 {
		return fmt.Sprintf("%d/%d reboots failed%s", len(f.Nodes), f.Max, names)
	}
	if len(f.Nodes) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d reboots failed (no --max-failed-reboots)%s", len(f.Nodes), names)
}

func limitCell(b Budget, published bool) string {
	switch {
	case !published:
		return "?"
	case b.Limit == nil:
		return "-"
	case strings.HasSuffix(b.Max, "%"):
		return strconv.Itoa(*b.Limit) + " (" + b.Max + ")"
	}
	return strconv.Itoa(*b.Limit)
}

// clock is an absolute time in the reader's zone (the zone of now).
func clock(now, t time.Time) string { return t.In(now.Location()).Format("Mon 2006-01-02 15:04 MST") }

// ago is how long from t to now, as kubectl prints ages ("5m", "3h12m", "2d").
func ago(now, t time.Time) string { return duration.HumanDuration(now.Sub(t)) }

func agoPtr(now time.Time, t *time.Time) string {
	if t == nil {
		return "-"
	}
	return ago(now, *t)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orUnsaid(s string) string {
	if s == "" {
		return "(no reason given)"
	}
	return s
}
