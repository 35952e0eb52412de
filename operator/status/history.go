package status

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/history"
)

// history prints the reboot cycles that ended within --since (of one node, or all), oldest first, from
// ConfigMap slipway-history, and with --svg draws them as a timeline.
func (c *client) history(ctx context.Context, w io.Writer, o options, e env) error {
	cm, err := c.cs.CoreV1().ConfigMaps(o.namespace).Get(ctx, history.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(w, "no history in %s/%s yet: the operator writes each cycle there within 5 minutes of its end (is -n right?)\n", o.namespace, history.ConfigMapName)
		return nil
	}
	if err != nil {
		return c.explain("reading ConfigMap "+o.namespace+"/"+history.ConfigMapName, err)
	}
	rec, err := history.Decode(cm.Data[history.Key])
	if err != nil {
		return fmt.Errorf("ConfigMap %s/%s: %w", o.namespace, history.ConfigMapName, err)
	}
	now := e.now()
	from := now.Add(-o.since)
	cycles := rec.Select(o.node, from)
	if o.svg != "" {
		// The picture spans the cycles shown (a night's roll-out is not a sliver of a day), with a margin.
		p := history.Picture{From: from, To: now, Location: e.zone}
		if len(cycles) > 0 {
			first, last := cycles[0].Start(), cycles[0].Ended
			for _, c := range cycles {
				if c.Start().Before(first) {
					first = c.Start()
				}
				if c.Ended.After(last) {
					last = c.Ended
				}
			}
			margin := max(last.Sub(first)/20, time.Second)
			p.From, p.To = first.Add(-margin), last.Add(margin)
		}
		if fleet, err := c.fleetConfigMap(ctx, o.namespace); err == nil {
			_, published := fleetswitch.ReadStatus(fleet)
			if set := settingsOf(fleet, published); set.pol != nil {
				if set.pol.Schedule != nil {
					p.Open = set.pol.Schedule.Open
				}
				if nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
					p.Limit = set.pol.MaxUnavailable.Limit(len(nodes.Items))
				}
			}
		}
		if err := os.WriteFile(o.svg, history.SVG(cycles, p), 0o644); err != nil {
			return fmt.Errorf("--svg: %w", err)
		}
		fmt.Fprintf(w, "wrote %s: %d cycles from %s to %s\n", o.svg, len(cycles), p.From.In(e.zone).Format("2006-01-02 15:04:05"), p.To.In(e.zone).Format("2006-01-02 15:04:05 MST"))
		return nil
	}
	return writeHistory(w, cycles, from, e.zone)
}

// writeHistory is the history as text: one row per cycle, oldest first.
func writeHistory(w io.Writer, cycles []history.Cycle, from time.Time, zone *time.Location) error {
	if len(cycles) == 0 {
		_, err := fmt.Fprintf(w, "no reboot cycle ended since %s\n", from.In(zone).Format("Mon 2006-01-02 15:04 MST"))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, pad, ' ', 0)
	fmt.Fprintln(tw, "ENDED\tNODE\tVERSION\tRESULT\tTOOK\tWAITED\tDRAIN\tREBOOT\tWHY")
	span := func(a, b time.Time) string {
		if a.IsZero() || b.IsZero() || b.Before(a) {
			return "-"
		}
		return b.Sub(a).Round(time.Second).String()
	}
	for _, c := range cycles {
		drain := c.Drained
		if drain.IsZero() {
			drain = c.Admitted
		}
		took := "-"
		if d := c.Took(); d > 0 {
			took = d.Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Ended.In(zone).Format("Mon 01-02 15:04"), oneLine(c.Node), orDash(oneLine(c.Version)),
			oneLine(c.Result), took, span(c.Asked, c.Admitted), span(drain, c.Granted), span(c.Granted, c.Ended), orDash(oneLine(c.Why)))
	}
	return tw.Flush()
}

// historyHelp is the history command in --help.
var historyHelp = strings.TrimPrefix(`
  history  the reboot cycles that ended within --since (default 24h), oldest first, of every node
           or of NODE: when each ended, its OS version, how (finished, failed, undrainable, aborted,
           replaced), how long it took, waited, drained and rebooted, and why it did not finish --
           after Events expired (ConfigMap slipway-history, the last 2,000 cycles); --svg FILE
           draws them as a timeline: a lane per node, the phases, in cycle against the budget,
           closed windows shaded`, "\n")
