package updateengine

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseBody(t *testing.T) {
	good := []interface{}{int64(1700000000), 0.5, StatusUpdatedNeedReboot, "4500.0.0", int64(42)}
	s, err := ParseBody(good)
	if err != nil {
		t.Fatal(err)
	}
	if s != (Status{LastCheckedTime: 1700000000, Progress: 0.5, CurrentOperation: StatusUpdatedNeedReboot, NewVersion: "4500.0.0", NewSize: 42}) || !s.NeedsReboot() {
		t.Errorf("got %+v", s)
	}
	bad := map[string][]interface{}{
		"empty":           {},
		"too few":         {int64(0), 0.0, StatusIdle, "0.0.0"},
		"too many":        {int64(0), 0.0, StatusIdle, "0.0.0", int64(0), "x"},
		"int32 time":      {int32(0), 0.0, StatusIdle, "0.0.0", int64(0)},
		"string progress": {int64(0), "0", StatusIdle, "0.0.0", int64(0)},
		"int operation":   {int64(0), 0.0, int64(6), "0.0.0", int64(0)},
		"empty operation": {int64(0), 0.0, "", "0.0.0", int64(0)},
		"uint64 size":     {int64(0), 0.0, StatusIdle, "0.0.0", uint64(0)},
		"lower case op":   {int64(0), 0.0, "update_status_idle", "0.0.0", int64(0)},
		"op with space":   {int64(0), 0.0, "UPDATE STATUS", "0.0.0", int64(0)},
		"op with newline": {int64(0), 0.0, "UPDATE_STATUS_IDLE\n", "0.0.0", int64(0)},
		"65-byte op":      {int64(0), 0.0, strings.Repeat("A", 65), "0.0.0", int64(0)},
		"300 KiB op":      {int64(0), 0.0, strings.Repeat("A", 300<<10), "0.0.0", int64(0)},
	}
	for name, body := range bad {
		if _, err := ParseBody(body); err == nil {
			t.Errorf("%s: accepted %v", name, body)
		}
	}
}

func TestBodyRoundTrip(t *testing.T) {
	s := Status{LastCheckedTime: 5, Progress: 1, CurrentOperation: StatusIdle, NewVersion: "0.0.0", NewSize: 7}
	got, err := ParseBody(s.Body())
	if err != nil || got != s {
		t.Errorf("round trip: %+v, %v", got, err)
	}
}

// What update_engine says ends up in Node annotations, which the API server caps at 256 KiB in total;
// one oversized or binary new_version must not make the agent's PATCHes fail.
func TestParseBodyBoundsNewVersion(t *testing.T) {
	body := func(v string) []interface{} {
		return []interface{}{int64(0), 0.0, StatusUpdatedNeedReboot, v, int64(0)}
	}
	cases := []struct {
		name, in, want string
		cut            bool
	}{
		{"ordinary", "4593.2.5", "4593.2.5", false},
		{"empty", "", "", false},
		{"exactly the limit", strings.Repeat("9", MaxVersionLen), strings.Repeat("9", MaxVersionLen), false},
		{"one over", strings.Repeat("9", MaxVersionLen+1), strings.Repeat("9", MaxVersionLen-len(CutMark)) + CutMark, true},
		{"300 KiB", strings.Repeat("x", 300<<10), strings.Repeat("x", MaxVersionLen-len(CutMark)) + CutMark, true},
		{"invalid UTF-8", "1.2\xff3", "1.2\uFFFD3", true},
		{"control characters", "1.2\n3\x00", "1.2\uFFFD3\uFFFD", true},
		// A multi-byte character straddling the cut is dropped whole, never split.
		{"cut at a rune boundary", strings.Repeat("a", MaxVersionLen-len(CutMark)-1) + "é" + strings.Repeat("b", 10), strings.Repeat("a", MaxVersionLen-len(CutMark)-1) + CutMark, true},
	}
	for _, c := range cases {
		s, err := ParseBody(body(c.in))
		if err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
			continue
		}
		if s.NewVersion != c.want {
			t.Errorf("%s: new_version %q, want %q", c.name, s.NewVersion, c.want)
		}
		if (s.Cut != "") != c.cut {
			t.Errorf("%s: Cut %q, want a note: %v", c.name, s.Cut, c.cut)
		}
		if len(s.NewVersion) > MaxVersionLen || !utf8.ValidString(s.NewVersion) {
			t.Errorf("%s: %d bytes, valid UTF-8 %v", c.name, len(s.NewVersion), utf8.ValidString(s.NewVersion))
		}
	}
}
