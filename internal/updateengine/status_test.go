package updateengine

import "testing"

func TestParseBody(t *testing.T) {
	good := []interface{}{int64(1700000000), 0.5, StatusUpdatedNeedReboot, "4500.0.0", int64(42)}
	s, err := ParseBody(good)
	if err != nil {
		t.Fatal(err)
	}
	if s != (Status{1700000000, 0.5, StatusUpdatedNeedReboot, "4500.0.0", 42}) || !s.NeedsReboot() {
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
