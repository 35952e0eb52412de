package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	"github.com/slipway-dev/slipway/operator/policy"
	versionrules "github.com/slipway-dev/slipway/operator/versions"
)

// VersionRow is one OS version the fleet has seen (kubectl slipway versions).
type VersionRow struct {
	Version string `json:"version"`
	// FirstSeen: when the fleet first saw it staged (a policy's minAge counts from here); nil unknown.
	FirstSeen *time.Time `json:"firstSeen,omitempty"`
	On        int        `json:"on"`     // nodes running it, out of their cycle (their version label)
	Staged    int        `json:"staged"` // nodes waiting to reboot into it
	// Held: of those, the nodes a version rule or a halt holds (blocked-by version, version-halted).
	Held int `json:"held"`
	// Finished: cycles the operator finished on it (the fleet record's proofs, as the status view's
	// Proven); Failed: failures recorded for it since its last resume.
	Finished int `json:"finished"`
	Failed   int `json:"failed"`
	// Halt: a person's halt in force ("" none).
	Halt string `json:"halt,omitempty"`
	// HeldBy: each policy whose versions rules hold it back now, with why ("the flags: denied by ...");
	// only for versions staged now or seen staged.
	HeldBy []string `json:"heldBy,omitempty"`
	// Canary: where the fleet's canaries (the flags' --canary-nodes, --max-failed-per-version) stand for
	// it, as admission decides: canaries, waiting, baking (until BakeEnd), released or halted; "" off.
	Canary  string     `json:"canary,omitempty"`
	BakeEnd *time.Time `json:"bakeEnd,omitempty"`
	// ProvenSince: when it met the proof rule in this cluster (admission.ProofOf: what
	// slipway_version_proven_since_seconds publishes for other clusters); nil while it does not.
	ProvenSince *time.Time `json:"provenSince,omitempty"`
}

// VersionRows lists every version the Nodes, the record and the fleet's versions name, newest first.
// rules are the policies' versions rules by who they are ("the flags", "rp/NAME"); canary the flags'
// canaries (zero: off or unknown).
func VersionRows(nodes []corev1.Node, rec fleetrecord.Record, vers fleetrecord.Versions, rules map[string]versionrules.Rules, canary admission.Canary, now time.Time) []VersionRow {
	rows := map[string]*VersionRow{}
	row := func(v string) *VersionRow {
		v = protocol.NormalVersion(v)
		if rows[v] == nil {
			rows[v] = &VersionRow{Version: v}
		}
		return rows[v]
	}
	// The counts are the status view's (admission.VersionsOf over the same entries, the record's
	// memory through admission.WithMemory), so the two views never disagree.
	entries := make([]admission.Node, len(nodes))
	for i := range nodes {
		entries[i] = admission.Of(&nodes[i], "", "")
		if e := entries[i]; e.Waiting() && e.AskedVersion != "" {
			if k := admission.KindOf(nodes[i].Annotations[protocol.BlockedBy]); k == admission.KindVersion || k == admission.KindVersionHalted {
				row(e.AskedVersion).Held++
			}
		}
	}
	stats := admission.VersionsOf(entries)
	for v := range stats {
		row(v)
	}
	for _, s := range vers.Seen {
		row(s.Version)
	}
	for _, p := range rec.Proofs {
		row(p.Version)
	}
	for _, f := range rec.Failures {
		if f.Version != "" {
			row(f.Version)
		}
	}
	for _, h := range vers.Halts {
		if h.Lifted == nil {
			row(h.Version)
		}
	}
	names := make([]string, 0, len(rules))
	for name := range rules {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]VersionRow, 0, len(rows))
	for v, r := range rows {
		if t := vers.FirstSeen(v); !t.IsZero() {
			t := t.UTC()
			r.FirstSeen = &t
		}
		var st admission.VersionStats
		if s := stats[v]; s != nil {
			st = *s
		}
		full := admission.WithMemory(st, v, rec)
		r.On, r.Staged = st.On, st.Asking
		r.Finished, r.Failed = len(full.Finished), full.FailuresSince(rec.VersionResumedAt(v))
		if cs := admission.CanaryOf(full, canary, rec.VersionResumedAt(v), now, 0); canary.On() && cs.State != "off" {
			r.Canary, r.BakeEnd = cs.State, timePtr(cs.BakeEnd)
		}
		_, personHalt := vers.HaltOf(v)
		r.ProvenSince = timePtr(admission.ProofOf(v, full, canary, rec.VersionResumedAt(v), personHalt, now).ProvenSince)
		if h, ok := vers.HaltOf(v); ok {
			r.Halt = fmt.Sprintf("by %s at %s", h.By, h.At.UTC().Format(time.RFC3339))
			if h.Why != "" {
				r.Halt += ": " + h.Why
			}
		}
		for _, name := range names {
			if r.Staged == 0 && r.FirstSeen == nil {
				break // never staged: nothing to judge (a version nodes only run is not rebooted into)
			}
			if d := rules[name].Decide(v, vers.FirstSeen(v), now); !d.Allowed {
				r.HeldBy = append(r.HeldBy, name+": "+d.Reason)
			}
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return protocol.CompareVersions(out[i].Version, out[j].Version) > 0 })
	return out
}

// versions prints VersionRows: from the Nodes, the fleet record and its versions, and the rules of the
// policies the operator published and of every RebootPolicy.
func (c *client) versions(ctx context.Context, w io.Writer, o options, e env) error {
	nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return c.explain("listing Nodes", err)
	}
	// The record and the versions beside it: one read of their ConfigMap.
	var rec fleetrecord.Record
	var vers fleetrecord.Versions
	cm, err := c.cs.CoreV1().ConfigMaps(o.namespace).Get(ctx, fleetrecord.ConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return c.explain("reading ConfigMap "+o.namespace+"/"+fleetrecord.ConfigMapName, err)
	default:
		if rec, err = fleetrecord.Decode(cm.Data[fleetrecord.Key]); err != nil {
			return fmt.Errorf("ConfigMap %s/%s: %w", o.namespace, fleetrecord.ConfigMapName, err)
		}
		if vers, err = fleetrecord.DecodeVersions(cm.Data[fleetrecord.VersionsKey]); err != nil {
			return fmt.Errorf("ConfigMap %s/%s key %s: %w", o.namespace, fleetrecord.ConfigMapName, fleetrecord.VersionsKey, err)
		}
	}
	rules := map[string]versionrules.Rules{}
	var canary admission.Canary
	var notes []string
	fleet, err := c.fleetConfigMap(ctx, o.namespace)
	if err != nil {
		return err
	}
	_, published := fleetswitch.ReadStatus(fleet)
	set := settingsOf(fleet, published)
	if set.pol == nil {
		notes = append(notes, "the flags' rules are unknown: "+set.why)
	} else {
		rules["the flags"] = set.pol.Versions
		canary = set.pol.Canary
		rps, err := c.policies(ctx)
		if err != nil {
			notes = append(notes, err.Error()+": RebootPolicies' rules left out")
		}
		for i := range rps {
			p := policy.CompilePool(set.pol.Spec, &rps[i])
			if p.Err != "" {
				notes = append(notes, "rp/"+rps[i].Name+" is not accepted ("+p.Err+"): its nodes are held whatever their version")
				continue
			}
			rules["rp/"+rps[i].Name] = p.Policy.Versions
		}
	}
	rows := VersionRows(nodes.Items, rec, vers, rules, canary, e.now())
	if o.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Versions []VersionRow `json:"versions"`
			Notes    []string     `json:"notes,omitempty"`
		}{rows, notes})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tFIRST SEEN\tON\tSTAGED\tHELD\tFINISHED\tFAILED\tCANARY\tPROVEN SINCE\tHALT / HELD BY")
	for _, r := range rows {
		first := "-"
		if r.FirstSeen != nil {
			first = r.FirstSeen.Format(time.RFC3339)
		}
		why := append([]string(nil), r.HeldBy...)
		if r.Halt != "" {
			why = append([]string{"halted " + r.Halt}, why...)
		}
		canaryCell := orDash(r.Canary)
		if r.Canary == "baking" && r.BakeEnd != nil {
			canaryCell += " until " + r.BakeEnd.Format(time.RFC3339)
		}
		proven := "-"
		if r.ProvenSince != nil {
			proven = r.ProvenSince.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", r.Version, first, r.On, r.Staged, r.Held, r.Finished, r.Failed, canaryCell, proven, strings.Join(why, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, "note: "+n)
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "no OS version seen yet (no Node carries a version label, nothing staged or recorded)")
	}
	return nil
}
