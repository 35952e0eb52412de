package admission

import (
	"context"
	"time"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// Proof is what one cluster shows others of an OS version: the cycles it ran for it, whether it is
// halted, and since when it counts as proven here (published as slipway_version_*; another cluster's
// gate reads them).
type Proof struct {
	Version string
	// Finished: cycles the operator ran for it that ended on it; Failed: failures recorded for it since
	// a person last resumed it. FirstFinished: when the first of those cycles ended (zero: none).
	Finished, Failed int
	FirstFinished    time.Time
	// Halted: it may not be rebooted into here (a person's halt, or --max-failed-per-version reached).
	Halted bool
	// ProvenSince: when it met the proof rule (ProofOf); zero while it does not.
	ProvenSince time.Time
}

// ProofOf applies the proof rule to version v: it is proven once max(c.Nodes, 1) cycles finished on it
// here, the canary bake after the last of them passed, no failure was recorded for it since a person
// last resumed it (resumed) and no halt is in force (personHalt, or c.MaxFailed failures).
// ProvenSince is when the last of these became true: the bake's end, or the resume if that came later.
// This is the rule the canaries release a version by (CanaryOf's "released"), with the canaries off
// counting one finished cycle as the canary.
func ProofOf(v string, s VersionStats, c Canary, resumed time.Time, personHalt bool, now time.Time) Proof {
	p := Proof{Version: v, Finished: len(s.Finished), Failed: s.FailuresSince(resumed)}
	if len(s.Finished) > 0 {
		p.FirstFinished = s.Finished[0]
	}
	p.Halted = personHalt || c.MaxFailed > 0 && p.Failed >= c.MaxFailed
	need := c.Nodes
	if need < 1 {
		need = 1
	}
	if p.Halted || p.Failed > 0 || len(s.Finished) < need {
		return p
	}
	since := s.Finished[need-1].Add(c.Bake)
	if since.Before(resumed) {
		since = resumed
	}
	if !now.Before(since) {
		p.ProvenSince = since
	}
	return p
}

// ProofCheck is the gate on another cluster's proof of a version (blocker.Proof is one): ok, or why not
// and when to look again; unreachable when the proof could not be read (held all the same).
type ProofCheck interface {
	Proven(ctx context.Context, version string, now time.Time) (ok bool, why string, retry time.Duration, unreachable bool)
}

// ProofGate holds a node whose staged OS version lacks the proof its policy requires of another
// cluster (versions.requireProof): fail closed, an unreadable proof holds too.
var ProofGate = Gate{Name: "proof", Scope: ScopeNode, Plan: PlanFilter,
	Doc: "its policy requires another cluster's proof of the OS version it staged (`versions.requireProof`, `--require-proof-selector`) and that cluster has not finished enough cycles on it, not proven it, halted it, or proved it less than the soak ago; or the proof cannot be read (`proof-source`: held, fail closed)",
	Check: func(ctx context.Context, in Input) Verdict {
		p := in.pol()
		if p.Proof == nil {
			return Pass
		}
		v := in.Node.AskedVersion
		if v == "" {
			return Held(KindProof, "its agent does not say which version it staged, and its policy requires another cluster's proof of it", 0)
		}
		ok, why, retry, unreachable := p.Proof.Proven(ctx, protocol.NormalVersion(v), in.Now)
		switch {
		case ok:
			return Pass
		case unreachable:
			return Held(KindProofSource, why, DefaultBlockerRetry)
		}
		if retry == 0 {
			retry = DefaultBlockerRetry // another cluster's proof changes without any event here
		}
		return Held(KindProof, why, retry)
	}}
