package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/operator/admission"
	versionrules "github.com/slipway-dev/slipway/operator/versions"
)

// kubectl slipway versions, known answers: every version the Nodes, the record and the fleet's
// versions name, newest first, with who holds it back and why.
func TestVersionRows(t *testing.T) {
	node := func(name, on, asks, blocked string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{protocol.Version: on}, Annotations: map[string]string{}}}
		if asks != "" {
			n.Annotations[protocol.RebootNeeded] = protocol.True
			n.Annotations[protocol.Status] = "UPDATE_STATUS_UPDATED_NEED_REBOOT"
			n.Annotations[protocol.NewVersion] = asks
		}
		if blocked != "" {
			n.Annotations[protocol.BlockedBy] = blocked
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	now := fixedNow
	nodes := []corev1.Node{
		node("a", "4600.0.0", "4600.1.0", "version: 4600.1.0 denied by rp/prod (deny: 4600.1.0)"),
		node("b", "4600.0.0", "4600.1.0", "budget: full (max-unavailable)"),
		node("c", "4600.1.0", "", ""),
		node("d", "4459.2.0", "4600.2.0", "version-halted: 4600.2.0 halted by alice"),
	}
	var rec fleetrecord.Record
	rec.AddProof(fleetrecord.Proof{Node: "c", UID: "u", Version: "4600.1.0", At: now.Add(-time.Hour)})
	// 4459.2.0's canary finished 3h ago and its 2h bake passed: proven since an hour ago.
	rec.AddProof(fleetrecord.Proof{Node: "d", UID: "ud", Version: "4459.2.0", At: now.Add(-3 * time.Hour)})
	rec.AddFailure(fleetrecord.Failure{Node: "x", UID: "ux", Reason: fleetrecord.ReasonStalled, Version: "4600.1.0", At: now.Add(-2 * time.Hour)})
	var vers fleetrecord.Versions
	vers.See("4600.1.0", "a", now.Add(-3*time.Hour))
	vers.See("4700.0.0", "z", now.Add(-time.Minute))
	vers.AddHalt(fleetrecord.Halt{Version: "4600.2.0", By: "alice", At: now.Add(-time.Minute), Why: "kernel regression"})
	prod, err := versionrules.Compile(nil, []string{"4600.1.0"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	flags, err := versionrules.Compile(nil, nil, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rows := VersionRows(nodes, rec, vers, map[string]versionrules.Rules{"rp/prod": prod, "the flags": flags}, admission.Canary{Nodes: 1, Bake: 2 * time.Hour, MaxFailed: 2}, now)
	var got []string
	for _, r := range rows {
		first := "-"
		if r.FirstSeen != nil {
			first = r.FirstSeen.Format(time.RFC3339)
		}
		got = append(got, strings.Join([]string{r.Version, first, itoa(r.On), itoa(r.Staged), itoa(r.Held), itoa(r.Finished), itoa(r.Failed), orDash(r.Canary), provenCell(r.ProvenSince), r.Halt, strings.Join(r.HeldBy, " | ")}, " "))
	}
	want := []string{
		"4700.0.0 2026-11-23T08:59:00Z 0 0 0 0 0 canaries -  the flags: allowed from 2026-11-24T08:59:00Z (minAge 24h0m0s)",
		"4600.2.0 - 0 1 1 0 0 canaries - by alice at 2026-11-23T08:59:00Z: kernel regression the flags: allowed from 2026-11-24T09:00:00Z (minAge 24h0m0s)",
		"4600.1.0 2026-11-23T06:00:00Z 1 2 1 1 1 waiting -  rp/prod: denied by 4600.1.0 | the flags: allowed from 2026-11-24T06:00:00Z (minAge 24h0m0s)",
		"4600.0.0 - 2 0 0 0 0 canaries -  ",
		"4459.2.0 - 1 0 0 1 0 released 2026-11-23T08:00:00Z  ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func itoa(i int) string { return fmt.Sprint(i) }

func provenCell(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}
