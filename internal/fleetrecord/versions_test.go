package fleetrecord

import (
	"fmt"
	"strings"
	"testing"
)

// The earliest sighting of a version wins, whatever order leaders learn them in; merging converges;
// the document round-trips; what cannot be read is an error, never the empty document.
func TestVersionsFirstSeen(t *testing.T) {
	var a, b Versions
	a.See("4459.2.1", "n2", at(10))
	a.See("4459.2.1", "n3", at(20))
	b.See("4459.2.1", "n1", at(5))
	b.See("4500.0.0", "n1", at(30))
	if got := a.FirstSeen("4459.2.1"); !got.Equal(at(10)) {
		t.Errorf("a later sighting moved the first: %s", got)
	}
	ab, ba := a, b
	ab.Seen, ba.Seen = append([]Seen(nil), a.Seen...), append([]Seen(nil), b.Seen...)
	ab.Merge(b)
	ba.Merge(a)
	if ab.Encode() != ba.Encode() {
		t.Errorf("merge depends on order:\n%s\n%s", ab.Encode(), ba.Encode())
	}
	if !ab.FirstSeen("4459.2.1").Equal(at(5)) || !ab.FirstSeen("4500.0.0").Equal(at(30)) || !ab.FirstSeen("1.0.0").IsZero() {
		t.Errorf("merged: %s", ab.Encode())
	}
	if ab.Merge(ba) {
		t.Error("merging what it holds changed it")
	}
	back, err := DecodeVersions(ab.Encode())
	if err != nil || back.Encode() != ab.Encode() {
		t.Errorf("round trip: %v %s", err, back.Encode())
	}
	if v, err := DecodeVersions(`{"seen":[{"version":"1.0.0","at":"2026-11-27T10:00:00Z"}],"later":[]}`); err != nil || v.FirstSeen("1.0.0").IsZero() {
		t.Errorf("a field of a later release is not read past: %v", err)
	}
	for _, bad := range []string{`{`, `{"seen":[{"version":"","at":"2026-11-27T10:00:00Z"}]}`, `{"seen":[{"version":"1.0.0"}]}`} {
		if _, err := DecodeVersions(bad); err == nil {
			t.Errorf("%s read without an error", bad)
		}
	}
}

// Past MaxSeen the earliest first-seen are forgotten: a minimum age then only waits longer.
func TestVersionsBound(t *testing.T) {
	var v Versions
	for i := 0; i < MaxSeen+10; i++ {
		v.See(fmt.Sprintf("%d.0.0", i), "n", at(i))
	}
	if len(v.Seen) != MaxSeen || !v.FirstSeen("0.0.0").IsZero() || v.FirstSeen(fmt.Sprintf("%d.0.0", MaxSeen+9)).IsZero() {
		t.Fatalf("%d kept; oldest %v", len(v.Seen), v.Seen[0])
	}
	if n := len(v.Encode()); n > 64*1024 {
		t.Errorf("a full document is %d bytes", n)
	}
	if !strings.HasPrefix(v.Encode(), `{"seen":[`) {
		t.Error(v.Encode()[:20])
	}
}

// A person's halt holds its version until it is lifted; halts and lifts merge like the rest (a lift
// wins over the same halt unlifted, whatever order leaders learn them in), once each; the newest halt
// in force is the one shown.
func TestVersionHalts(t *testing.T) {
	var v Versions
	if !v.AddHalt(Halt{Version: "4600.0.0", By: "alice", At: at(10), Why: "kernel regression"}) || v.AddHalt(Halt{Version: "4600.0.0", By: "alice", At: at(10)}) {
		t.Fatal("a halt is added once")
	}
	unlifted := v
	unlifted.Halts = []Halt{v.Halts[0]}
	if h, ok := v.HaltOf("4600.0.0"); !ok || h.By != "alice" {
		t.Errorf("halt not in force: %+v %v", h, ok)
	}
	if n := v.Lift("4600.0.0", "bob", at(10)); n != 1 {
		t.Errorf("lifted %d", n)
	}
	if _, ok := v.HaltOf("4600.0.0"); ok {
		t.Error("a lifted halt is in force")
	}
	if unlifted.Merge(v); func() bool { _, ok := unlifted.HaltOf("4600.0.0"); return ok }() {
		t.Error("merging the lift into the unlifted halt left it in force")
	}
	if v.Merge(Versions{Halts: []Halt{{Version: "4600.0.0", By: "alice", At: at(10)}}}) {
		t.Error("an unlifted copy changed the lifted halt")
	}
	var o Versions
	o.AddHalt(Halt{Version: "4600.0.0", By: "carol", At: at(20), Why: "again"})
	if !v.Merge(o) || v.Merge(o) {
		t.Error("merge of a new halt")
	}
	if h, ok := v.HaltOf("4600.0.0"); !ok || h.By != "carol" {
		t.Errorf("a new halt holds again: %+v %v", h, ok)
	}
	back, err := DecodeVersions(v.Encode())
	if err != nil || back.Encode() != v.Encode() {
		t.Errorf("round trip: %v", err)
	}
	if _, err := DecodeVersions(`{"halts":[{"version":"","by":"x","at":"2026-11-27T10:00:00Z"}]}`); err == nil {
		t.Error("a halt without a version read")
	}
	for i := 0; i < MaxHalts+5; i++ {
		v.AddHalt(Halt{Version: "1.0.0", By: "x", At: at(100 + i), Lifted: &Lift{By: "y", At: at(100 + i)}})
	}
	if len(v.Halts) != MaxHalts {
		t.Errorf("%d halts kept", len(v.Halts))
	}
	if h, ok := v.HaltOf("4600.0.0"); !ok || h.By != "carol" {
		t.Errorf("the bound dropped a halt in force: %+v %v", h, ok)
	}
	if got := v.InForce(); len(got) != 1 || got[0] != "4600.0.0" {
		t.Errorf("in force: %v", got)
	}
}
