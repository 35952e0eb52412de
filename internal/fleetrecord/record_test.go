package fleetrecord

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

func TestHaltOutlivesItsNodeUntilResumed(t *testing.T) {
	var r Record
	r.AddFailure(Failure{Node: "a", UID: "u1", Reason: ReasonOldVersion, Version: "4593.2.5", At: at(0), Budget: true})
	r.AddFailure(Failure{Node: "b", UID: "u2", Reason: ReasonStalled, Version: "4593.2.5", At: at(1)})
	if got := r.Halted(2); !reflect.DeepEqual(got, []string{"4593.2.5"}) {
		t.Fatalf("halted: %v, want the version", got)
	}
	if got := r.Halted(3); got != nil {
		t.Fatalf("halted at 3: %v, want none", got)
	}
	if got := r.Halted(0); got != nil {
		t.Fatalf("halts off: %v", got)
	}
	// Nothing about the Nodes is read: the record alone holds the halt. A resume of another version
	// or of the failure budget lifts nothing.
	r.AddResume(Resume{Version: "4593.2.6", By: "alice", At: at(2)})
	r.AddResume(Resume{By: "alice", At: at(2)})
	if got := r.Halted(2); len(got) != 1 {
		t.Fatalf("halt lifted by another resume: %v", got)
	}
	r.AddResume(Resume{Version: "4593.2.5", By: "bob", Why: "rollback understood", At: at(3)})
	if got := r.Halted(1); got != nil {
		t.Fatalf("halt not lifted by its resume: %v", got)
	}
	if x, ok := r.LastResume("4593.2.5"); !ok || x.By != "bob" || x.Why != "rollback understood" || !x.At.Equal(at(3)) {
		t.Fatalf("last resume: %+v %v", x, ok)
	}
	r.AddFailure(Failure{Node: "c", UID: "u3", Reason: ReasonStalled, Version: "4593.2.5", At: at(4)})
	if got := r.Halted(1); len(got) != 1 {
		t.Fatalf("a failure after the resume counts: %v", got)
	}
	if n := len(r.VersionFailures("4593.2.5")); n != 3 {
		t.Fatalf("version failures: %d, want all 3 (the caller counts from the resume)", n)
	}
}

func TestBudgetCountsMachinesSinceTheLastReset(t *testing.T) {
	var r Record
	r.AddFailure(Failure{Node: "a", UID: "u1", Reason: ReasonBlocker, At: at(0), Budget: true})
	r.AddFailure(Failure{Node: "a", UID: "u1", Reason: ReasonStalled, At: at(1), Budget: true})
	// The same name, re-created: another machine.
	r.AddFailure(Failure{Node: "a", UID: "u9", Reason: ReasonStalled, At: at(2), Budget: true})
	// A per-version stall entry does not count twice against the budget.
	r.AddFailure(Failure{Node: "b", UID: "u2", Reason: ReasonStalled, Version: "v2", At: at(2)})
	if got := r.BudgetFailures(); !reflect.DeepEqual(got, []string{"a", "a"}) {
		t.Fatalf("budget failures: %v", got)
	}
	r.AddResume(Resume{By: "alice", At: at(2)})
	if got := r.BudgetFailures(); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("after reset at the time of the last failure: %v (a failure at the reset's second still counts)", got)
	}
	r.AddResume(Resume{By: "alice", At: at(3)})
	if got := r.BudgetFailures(); got != nil {
		t.Fatalf("after reset: %v", got)
	}
}

// A proof is kept to the second, rounded up: the bake that counts from it is never shorter than asked.
func TestProofRoundedUp(t *testing.T) {
	var r Record
	r.AddProof(Proof{Node: "a", UID: "u1", Version: "v", At: at(0).Add(200 * time.Millisecond)})
	r.AddProof(Proof{Node: "b", UID: "u2", Version: "v", At: at(3)})
	got := r.VersionProofs("v", func(string) bool { return false })
	if len(got) != 2 || !got[0].Equal(at(0).Add(time.Second)) || !got[1].Equal(at(3)) {
		t.Fatalf("proofs %v, want %v (rounded up) and %v (whole)", got, at(0).Add(time.Second), at(3))
	}
}

func TestAddIsIdempotentAndMergeConverges(t *testing.T) {
	f := Failure{Node: "a", UID: "u1", Reason: ReasonOldVersion, Version: "v", At: at(0).Add(300 * time.Millisecond), Budget: true}
	var r Record
	if !r.AddFailure(f) || r.AddFailure(f) {
		t.Fatal("the first add must change the record, the second not")
	}
	p := Proof{Node: "a", UID: "u1", Version: "v", At: at(1)}
	if !r.AddProof(p) || r.AddProof(p) {
		t.Fatal("proofs: the first add must change the record, the second not")
	}
	r.AddResume(Resume{Version: "v", By: "x", At: at(2)})
	var s Record
	s.AddProof(Proof{Node: "b", UID: "u2", Version: "v", At: at(5)})
	a, b := r.Clone(), s.Clone()
	a.Merge(s)
	b.Merge(r)
	if a.Encode() != b.Encode() {
		t.Fatalf("merge is not symmetric:\n%s\n%s", a.Encode(), b.Encode())
	}
	if a.Merge(b) {
		t.Fatal("merging what is already there changed the record")
	}
}

func TestEncodeDecodeRoundTripAndStableOrder(t *testing.T) {
	var entries []Failure
	for i := 0; i < 20; i++ {
		entries = append(entries, Failure{Node: fmt.Sprintf("n%d", i%7), UID: fmt.Sprintf("u%d", i), Reason: ReasonStalled, Version: "v", At: at(i % 5), Budget: i%2 == 0})
	}
	var a, b Record
	for _, f := range entries {
		a.AddFailure(f)
	}
	rand.New(rand.NewSource(1)).Shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
	for _, f := range entries {
		b.AddFailure(f)
	}
	a.AddResume(Resume{Version: "v", By: "me", At: at(3)})
	b.AddResume(Resume{Version: "v", By: "me", At: at(3)})
	if a.Encode() != b.Encode() {
		t.Fatal("the same record in another order encodes differently")
	}
	back, err := Decode(a.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if back.Encode() != a.Encode() {
		t.Fatalf("round trip changed the record:\n%s\n%s", a.Encode(), back.Encode())
	}
}

func TestDecodeRefusesWhatItCannotRead(t *testing.T) {
	for _, bad := range []string{
		"{", "[]", `{"failures":"x"}`, `{"halts":[]}`,
		`{"failures":[{"reason":"stalled","at":"2026-11-26T03:00:00Z"}]}`, // no node
		`{"failures":[{"node":"a","reason":"stalled"}]}`,                  // no time
		`{"proofs":[{"node":"a","at":"2026-11-26T03:00:00Z"}]}`,           // no version
		`{"resumes":[{"version":"v","by":"x"}]}`,                          // no time
	} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%q): no error", bad)
		}
	}
	r, err := Decode("  ")
	if err != nil || len(r.Failures)+len(r.Proofs)+len(r.Resumes) != 0 {
		t.Fatalf("empty: %+v %v", r, err)
	}
}

// TestBoundKeepsHaltsAndSize: a record driven far past its limits stays under a quarter of a
// ConfigMap's 1 MiB with the longest names Kubernetes allows, and every halt and pause it held
// before bounding it still holds.
func TestBoundKeepsHaltsAndSize(t *testing.T) {
	long := strings.Repeat("n", 253)
	uid := "0f0f0f0f-0f0f-0f0f-0f0f-0f0f0f0f0f0f"
	why := strings.Repeat("w", 2000)
	var r Record
	for i := 0; i < 5*MaxFailures; i++ {
		v := fmt.Sprintf("4593.%d.0", i%3)
		r.AddFailure(Failure{Node: long[:250] + fmt.Sprint(i%1000), UID: uid, Reason: ReasonStalled, Version: v, At: at(i), Why: why, Budget: i%2 == 0})
		r.AddProof(Proof{Node: long, UID: uid, Version: v, At: at(i), BootID: uid})
		if i%10 == 0 {
			r.AddResume(Resume{Version: v, By: long, Why: why, At: at(i)})
		}
	}
	r.AddResume(Resume{Version: "4593.0.0", By: "last", At: at(5*MaxFailures - 5)})
	before := r.Halted(MaxFailures / 10)
	budget := len(r.BudgetFailures())
	enc := r.Encode()
	if len(enc) > 256<<10 {
		t.Fatalf("encoded record is %d bytes, over 256 KiB", len(enc))
	}
	back, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Failures) > MaxFailures || len(back.Proofs) > MaxProofs || len(back.Resumes) > MaxResumes {
		t.Fatalf("over the bounds: %d failures, %d proofs, %d resumes", len(back.Failures), len(back.Proofs), len(back.Resumes))
	}
	if after := back.Halted(MaxFailures / 10); !reflect.DeepEqual(after, before) {
		t.Fatalf("bounding changed the halts: %v -> %v", before, after)
	}
	if !back.ResumedAt("4593.0.0").Equal(at(5*MaxFailures - 5)) {
		t.Fatal("the newest resume of a version was dropped")
	}
	if got := len(back.BudgetFailures()); got != budget && got < 1 {
		t.Fatalf("budget failures %d -> %d", budget, got)
	}
	if len(back.Failures[0].Why) > MaxWhy {
		t.Fatalf("why kept at %d bytes", len(back.Failures[0].Why))
	}
}

func TestClipKeepsRunes(t *testing.T) {
	s := strings.Repeat("é", 200) // 2 bytes each
	c := clip(s, 255)
	if len(c) != 254 || !strings.HasPrefix(s, c) {
		t.Fatalf("clip: %d bytes", len(c))
	}
}

func BenchmarkEncodeFull(b *testing.B) {
	var r Record
	for i := 0; i < MaxFailures; i++ {
		r.AddFailure(Failure{Node: fmt.Sprintf("node-%04d", i), UID: fmt.Sprint(i), Reason: ReasonStalled, Version: "v", At: at(i), Budget: true})
		r.AddProof(Proof{Node: fmt.Sprintf("node-%04d", i), UID: fmt.Sprint(i), Version: "v", At: at(i)})
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = r.Encode()
	}
}

// A stall after the grant that the same machine got over (it finished its cycle on that version later)
// was late, not failed: it stops counting and Bound forgets it. The same stall of a machine that never
// finishes -- or of another machine under the same name -- keeps counting.
func TestLateStallCountsNoMore(t *testing.T) {
	var r Record
	r.AddFailure(Failure{Node: "a", UID: "u1", Reason: ReasonStalled, Version: "v", At: at(0)})
	r.AddFailure(Failure{Node: "b", UID: "u2", Reason: ReasonStalled, Version: "v", At: at(0)})
	r.AddFailure(Failure{Node: "a", UID: "u1", Reason: ReasonStalled, At: at(0), Budget: true}) // its reboot-failed mark
	if got := r.Halted(2); len(got) != 1 {
		t.Fatalf("two stalls: %v", got)
	}
	r.AddProof(Proof{Node: "a", UID: "u1", Version: "v", At: at(3)})                   // a got over it
	r.AddProof(Proof{Node: "b", UID: "u9", Version: "v", At: at(3)})                   // another machine named b
	r.AddProof(Proof{Node: "b", UID: "u2", Version: "v", At: at(0).Add(-time.Minute)}) // before the stall
	if got := r.Halted(2); got != nil {
		t.Errorf("a late stall still halts: %v", got)
	}
	if got := r.Halted(1); len(got) != 1 || len(r.VersionFailures("v")) != 1 {
		t.Errorf("b's stall must still count: halted %v, failures %v", got, r.VersionFailures("v"))
	}
	if got := r.BudgetFailures(); len(got) != 1 {
		t.Errorf("the failure budget still counts a's reboot-failed mark: %v", got)
	}
	r.Bound()
	if len(r.Failures) != 2 {
		t.Errorf("Bound kept %d failures, want b's stall and a's budget mark: %+v", len(r.Failures), r.Failures)
	}
}

// One proof per machine and version, the latest finish: a leader killed between writing a proof and
// the PATCH that ends the cycle leaves the PATCH to the next leader, whose finish is the one the bake
// counts from. Proofs of machines still in their cycle are left out.
func TestProofPerMachineAndVersion(t *testing.T) {
	var r Record
	r.AddProof(Proof{Node: "a", UID: "u1", Version: "v", At: at(0)})
	if !r.AddProof(Proof{Node: "a", UID: "u1", Version: "v", At: at(2)}) || r.AddProof(Proof{Node: "a", UID: "u1", Version: "v", At: at(1)}) {
		t.Fatal("a later finish replaces the proof; an earlier one does not")
	}
	r.AddProof(Proof{Node: "a", UID: "u1", Version: "w", At: at(5)})
	r.AddProof(Proof{Node: "a", UID: "u9", Version: "v", At: at(3)}) // the same name, another machine
	if got := r.VersionProofs("v", nil); len(got) != 2 || !got[0].Equal(at(2)) || !got[1].Equal(at(3)) {
		t.Errorf("proofs of v: %v", got)
	}
	if got := r.VersionProofs("v", func(uid string) bool { return uid == "u1" }); len(got) != 1 || !got[0].Equal(at(3)) {
		t.Errorf("proofs of v with u1 still in its cycle: %v", got)
	}
}

// SameButProofs tells a record that lacks only proofs (which may wait) from one that lacks a failure
// or a resume (which may not).
func TestSameButProofs(t *testing.T) {
	var stored Record
	stored.AddFailure(Failure{Node: "a", UID: "u1", Reason: ReasonStalled, At: at(0)})
	mine := stored.Clone()
	if !mine.SameButProofs(stored) {
		t.Error("equal records: want same")
	}
	mine.AddProof(Proof{Node: "b", UID: "u2", Version: "4593.2.5", At: at(1)})
	if !mine.SameButProofs(stored) || !stored.SameButProofs(mine) {
		t.Error("a proof more: want same but proofs")
	}
	withFailure := mine.Clone()
	withFailure.AddFailure(Failure{Node: "c", UID: "u3", Reason: ReasonOldVersion, Version: "4593.2.5", At: at(2), Budget: true})
	if withFailure.SameButProofs(stored) {
		t.Error("a failure more: want different")
	}
	withResume := mine.Clone()
	withResume.AddResume(Resume{Version: "4593.2.5", By: "alice", At: at(3)})
	if withResume.SameButProofs(stored) {
		t.Error("a resume more: want different")
	}
}

// TestBoundNeverLiftsAHalt, a property over random failure sequences: a record bounded after every
// change decides everything as the same record never bounded -- every halt under every
// --max-failed-per-version, every canary place held by a stall or a replaced canary, each version's
// failures since its resume (up to MaxFailures, beyond which the halt holds under every setting) and
// the budget's failed machines. The sequences mix a few real versions with a flood of one-off version
// strings (what one compromised node can make), budget-only failures of many machines, late stalls
// that a proof excuses, and resumes.
func TestBoundNeverLiftsAHalt(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var bounded, ref Record
		now := at(0)
		real := []string{"4600.0.0", "4601.0.0", "4602.1.0"}
		for step := 0; step < 1200; step++ {
			now = now.Add(time.Duration(rng.Intn(3)) * time.Second)
			node := fmt.Sprintf("n-%d", rng.Intn(400))
			uid := "uid-" + node
			var apply func(r *Record)
			switch op := rng.Intn(100); {
			case op < 40: // the flood: a failure of a version nobody else runs
				f := Failure{Node: node, UID: uid, Reason: ReasonOldVersion, Version: fmt.Sprintf("9999.%d.0", step), At: now, Budget: rng.Intn(2) == 0, Why: "flood"}
				apply = func(r *Record) { r.AddFailure(f) }
			case op < 55: // a real version's failure
				f := Failure{Node: node, UID: uid, Reason: ReasonOldVersion, Version: real[rng.Intn(len(real))], At: now, Budget: true, Why: "old version"}
				apply = func(r *Record) { r.AddFailure(f) }
			case op < 62: // a canary stalled after its grant
				f := Failure{Node: node, UID: uid, Reason: ReasonStalled, Version: real[rng.Intn(len(real))], At: now, Why: "stalled"}
				apply = func(r *Record) { r.AddFailure(f) }
			case op < 66: // a canary's Node deleted after its grant (a UID is deleted once)
				f := Failure{Node: node, UID: fmt.Sprintf("%s-%d", uid, step), Reason: ReasonReplaced, Version: real[rng.Intn(len(real))], At: now, Why: "replaced"}
				apply = func(r *Record) { r.AddFailure(f) }
			case op < 80: // a budget-only failure (a blocker firing after the reboot)
				f := Failure{Node: node, UID: uid, Reason: ReasonBlocker, At: now, Budget: true, Why: "blocker"}
				apply = func(r *Record) { r.AddFailure(f) }
			case op < 95: // a cycle finished: a proof (it may excuse this machine's stall: late)
				p := Proof{Node: node, UID: uid, Version: real[rng.Intn(len(real))], At: now}
				apply = func(r *Record) { r.AddProof(p) }
			default: // a person resumes a real version or the budget
				v := ""
				if rng.Intn(2) == 0 {
					v = real[rng.Intn(len(real))]
				}
				x := Resume{Version: v, By: "alice", At: now}
				apply = func(r *Record) { r.AddResume(x) }
			}
			apply(&bounded)
			apply(&ref)
			bounded.Bound()
			// A lifted halt stays lifted (what Bound drops never comes back), so every third step is
			// enough to see one; resumes are only every ~20 steps.
			if step%3 != 0 {
				continue
			}
			if msg := sameDecisions(ref, bounded, append(real, fmt.Sprintf("9999.%d.0", step))); msg != "" {
				t.Fatalf("seed %d step %d: %s", seed, step, msg)
			}
		}
		if len(bounded.Failures) < MaxFailures {
			t.Fatalf("seed %d: only %d failures kept: the sequence never reached the bound, the property was not exercised", seed, len(bounded.Failures))
		}
	}
}

// sameDecisions says how bounded decides differently from ref ("" : it does not).
func sameDecisions(ref, bounded Record, versions []string) string {
	for _, max := range []int{1, 3, MaxFailures} {
		if a, b := ref.Halted(max), bounded.Halted(max); !reflect.DeepEqual(a, b) {
			return fmt.Sprintf("halted at --max-failed-per-version=%d: %v, bounded %v", max, a, b)
		}
	}
	since := func(ts []time.Time, from time.Time) int {
		n := 0
		for _, t := range ts {
			if !t.Before(from) {
				n++
			}
		}
		return n
	}
	for _, v := range versions {
		resumed := ref.VersionResumedAt(v)
		if !resumed.Equal(bounded.VersionResumedAt(v)) {
			return fmt.Sprintf("%s resumed at %v, bounded %v", v, resumed, bounded.VersionResumedAt(v))
		}
		a, b := since(ref.VersionFailures(v), resumed), since(bounded.VersionFailures(v), resumed)
		if a != b && (a < MaxFailures || b < MaxFailures) {
			return fmt.Sprintf("%s: %d failures since its resume, bounded %d", v, a, b)
		}
		if a, b := since(ref.VersionStalls(v), resumed), since(bounded.VersionStalls(v), resumed); a != b {
			return fmt.Sprintf("%s: %d canary places held, bounded %d", v, a, b)
		}
	}
	if a, b := len(ref.BudgetFailures()), len(bounded.BudgetFailures()); a != b && (a < MaxFailures || b < MaxFailures) {
		return fmt.Sprintf("failed machines: %d, bounded %d", a, b)
	}
	return ""
}

// The scratch scenario of the review: one halted version's only failure, then 200 newer failures of
// other versions. The stored record still halts it.
func TestFloodOfOtherVersionsKeepsAHalt(t *testing.T) {
	var r Record
	r.AddFailure(Failure{Node: "canary", UID: "u0", Reason: ReasonStalled, Version: "4600.0.0", At: at(0)})
	for i := 1; i <= MaxFailures; i++ {
		r.AddFailure(Failure{Node: "evil", UID: "u1", Reason: ReasonOldVersion, Version: fmt.Sprintf("9999.%d.0", i), At: at(i), Budget: true})
	}
	back, err := Decode(r.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Halted(1); len(got) == 0 || got[0] != "4600.0.0" {
		t.Fatalf("after %d newer failures of other versions the stored record halts %v, want 4600.0.0 first", MaxFailures, got)
	}
	if len(back.VersionStalls("4600.0.0")) != 1 {
		t.Fatal("the stalled canary's place was bounded away")
	}
}

// Two leaders that both saw one Node's deletion (a cut leader once the cut heals, and its successor)
// record one failure, whatever their clocks said; another machine replaced is another failure.
func TestReplacedOncePerMachine(t *testing.T) {
	var r Record
	f := Failure{Node: "c", UID: "u1", Reason: ReasonReplaced, Version: "4600.0.0", At: at(0)}
	r.AddFailure(f)
	f.At = at(0).Add(3 * time.Second)
	if r.AddFailure(f) || len(r.VersionStalls("4600.0.0")) != 1 {
		t.Fatalf("one deletion counted twice: %+v", r.Failures)
	}
	f.UID = "u2"
	if !r.AddFailure(f) || len(r.VersionStalls("4600.0.0")) != 2 {
		t.Fatalf("a second machine replaced is not a second failure: %+v", r.Failures)
	}
}

// A resume dated past the reader's clock (plus the skew) does not count: one dated in 2100 would
// forgive every failure and lift every halt until then.
func TestDropFuture(t *testing.T) {
	now := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	var r Record
	r.AddResume(Resume{Version: "4500.6.0", By: "ops", At: now.Add(-time.Hour)})
	r.AddResume(Resume{Version: "4500.6.0", By: "mallory", At: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)})
	r.AddResume(Resume{By: "skewed", At: now.Add(2 * time.Minute)})
	kept, future := r.DropFuture(now.Add(MaxResumeSkew))
	if len(future) != 1 || future[0].By != "mallory" {
		t.Fatalf("dropped %+v, want mallory's 2100 resume", future)
	}
	if got := kept.ResumedAt("4500.6.0"); !got.Equal(now.Add(-time.Hour)) {
		t.Errorf("4500.6.0 resumed at %s, want the hour-old resume", got)
	}
	if got := kept.ResumedAt(""); !got.Equal(now.Add(2 * time.Minute)) {
		t.Errorf("the budget's resume, 2 minutes ahead (within the skew): %s", got)
	}
	if len(r.Resumes) != 3 {
		t.Error("DropFuture changed its receiver")
	}
}
