package history

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

// A night's roll-out of four nodes with budget 2: two finished, one failed back on its old version,
// one replaced mid-cycle by the autoscaler.
func night() []Cycle {
	return []Cycle{
		{Node: "web-0", UID: "u0", Version: "4593.2.5", Asked: at(0), Admitted: at(0), Drained: at(0), Granted: at(3), Ended: at(12), Result: Finished},
		{Node: "web-1", UID: "u1", Version: "4593.2.5", Asked: at(0), Admitted: at(1), Drained: at(1), Granted: at(5), Ended: at(15), Result: Finished},
		{Node: "db-0", UID: "u2", Version: "4593.2.5", Asked: at(0), Admitted: at(12), Drained: at(12), Granted: at(20), Ended: at(31), Result: Failed, Why: "old-version: back on 4459.2.0"},
		{Node: "web-2", UID: "u3", Version: "4593.2.5", Asked: at(2), Admitted: at(15), Drained: at(15), Ended: at(18), Result: Replaced},
	}
}

func TestAddMergeBoundRoundTrip(t *testing.T) {
	var r Record
	for _, c := range night() {
		if !r.Add(c) {
			t.Fatalf("%s not added", c.Node)
		}
	}
	if r.Add(night()[0]) {
		t.Error("the same cycle added twice (a leader change reports it twice)")
	}
	if r.Add(Cycle{Node: "x"}) || r.Add(Cycle{Ended: at(1)}) {
		t.Error("a cycle without node or end added")
	}
	got := []string{}
	for _, c := range r.Cycles {
		got = append(got, c.Node)
	}
	if strings.Join(got, " ") != "web-0 web-1 web-2 db-0" {
		t.Errorf("order %v: want by end", got)
	}
	back, err := Decode(r.Encode())
	if err != nil || len(back.Cycles) != 4 || back.Cycles[3].Why != "old-version: back on 4459.2.0" {
		t.Fatalf("round trip: %v %+v", err, back)
	}
	var other Record
	other.Add(Cycle{Node: "web-0", UID: "u0", Admitted: at(100), Ended: at(110), Result: Finished})
	if !back.Merge(other) || back.Merge(other) || len(back.Cycles) != 5 {
		t.Errorf("merge: %d cycles", len(back.Cycles))
	}
	if got := back.Select("web-0", at(60)); len(got) != 1 || got[0].Admitted != at(100) {
		t.Errorf("select web-0 since 01:60: %+v", got)
	}
	if got := back.Select("", at(13)); len(got) != 4 {
		t.Errorf("select since 01:13: %d cycles, want 4", len(got))
	}
	if night()[0].Took() != 12*time.Minute || (Cycle{Ended: at(1)}).Took() != 0 {
		t.Error("took")
	}
	var big Record
	for i := range MaxCycles + 10 {
		big.Add(Cycle{Node: "n", Admitted: at(i), Ended: at(i + 1), Result: Finished})
	}
	big.Bound()
	if len(big.Cycles) != MaxCycles || big.Cycles[0].Ended != at(11) {
		t.Errorf("bound kept %d, oldest ending %s: want the newest %d", len(big.Cycles), big.Cycles[0].Ended, MaxCycles)
	}
	if n := len(big.Encode()); n > 512*1024 {
		t.Errorf("%d cycles encode to %d bytes: over half a ConfigMap", MaxCycles, n)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, s := range []string{`{`, `{"cycles":[{"node":""}]}`, `{"cycles":[{"node":"a"}]}`, `{"cycles":{}}`} {
		if _, err := Decode(s); err == nil {
			t.Errorf("%q decoded", s)
		}
	}
	if r, err := Decode(""); err != nil || len(r.Cycles) != 0 {
		t.Errorf("empty: %v", err)
	}
	// A newer operator's fields are skipped: an operator rolled back reads and extends the record.
	if r, err := Decode(`{"cycles":[{"node":"a","ended":"2026-11-26T01:00:00Z","result":"finished","newer":1}],"also":2}`); err != nil || len(r.Cycles) != 1 {
		t.Errorf("newer fields: %v %+v", err, r)
	}
}

// The timeline is golden (testdata/night.svg; SLIPWAY_UPDATE_GOLDEN=1 writes it), valid XML, and
// renders (rsvg-convert, where installed).
func TestSVG(t *testing.T) {
	open := func(tm time.Time) bool { return tm.Before(at(30)) } // the window closes at 01:30
	got := SVG(night(), Picture{From: at(0), To: at(40), Limit: 2, Open: open})
	golden := filepath.Join("testdata", "night.svg")
	if os.Getenv("SLIPWAY_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("SVG differs from %s (SLIPWAY_UPDATE_GOLDEN=1 rewrites it):\n%s", golden, got)
	}
	dec := xml.NewDecoder(bytes.NewReader(got))
	rects, lanes := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not valid XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	for _, n := range []string{">web-0<", ">web-1<", ">db-0<", ">web-2<", "budget 2"} {
		if strings.Contains(string(got), n) {
			lanes++
		}
	}
	if lanes != 5 || rects < 10 {
		t.Errorf("want a lane per node and the budget line: %d of 5 found, %d rects", lanes, rects)
	}
	if !strings.Contains(string(got), `fill="#cc0000"><title>db-0 rebooting, failed`) {
		t.Error("the failed cycle is not drawn in the failure colour")
	}
	conv, err := exec.LookPath("rsvg-convert")
	if err != nil {
		t.Skip("rsvg-convert not found (Debian's librsvg2-bin): the SVG is checked as XML, not rendered")
	}
	png := filepath.Join(t.TempDir(), "night.png")
	if out, err := exec.Command(conv, "-o", png, golden).CombinedOutput(); err != nil {
		t.Fatalf("rsvg-convert: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("no PNG rendered: %v", err)
	}
}

// The record is bounded by bytes too: 2,000 cycles with long texts (a 253-byte node name, a drain
// error as the why) would not fit in a ConfigMap; the newest that fit in MaxBytes are kept.
func TestBoundByBytes(t *testing.T) {
	var r Record
	t0 := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	long := strings.Repeat("n", 253)
	for i := 0; i < MaxCycles; i++ {
		r.Add(Cycle{Node: fmt.Sprintf("%s-%d", long[:240], i), Ended: t0.Add(time.Duration(i) * time.Second), Result: Failed,
			Why: "drain: " + strings.Repeat("cannot evict pod: disruption budget ", 20)})
	}
	enc := r.Encode()
	if len(enc) > MaxBytes {
		t.Fatalf("encoded %d bytes, want at most %d", len(enc), MaxBytes)
	}
	back, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(back.Cycles); n == 0 || n == MaxCycles || !strings.HasSuffix(back.Cycles[n-1].Node, fmt.Sprintf("-%d", MaxCycles-1)) {
		t.Errorf("kept %d cycles, the newest %q: want fewer than %d, the newest kept", n, back.Cycles[max(n-1, 0)].Node, MaxCycles)
	}
	// Short cycles: the count bounds, not the bytes.
	var small Record
	for i := 0; i < MaxCycles+10; i++ {
		small.Add(Cycle{Node: fmt.Sprintf("n%d", i), Ended: t0.Add(time.Duration(i) * time.Second), Result: Finished})
	}
	if got, _ := Decode(small.Encode()); len(got.Cycles) != MaxCycles {
		t.Errorf("%d short cycles kept, want %d", len(got.Cycles), MaxCycles)
	}
}
