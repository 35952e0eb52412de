package fleetswitch

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func apply(t *testing.T, cm *corev1.ConfigMap, patch []byte) {
	t.Helper()
	var p struct{ Data map[string]*string }
	if err := json.Unmarshal(patch, &p); err != nil {
		t.Fatal(err)
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	for k, v := range p.Data {
		if v == nil {
			delete(cm.Data, k)
		} else {
			cm.Data[k] = *v
		}
	}
}

func TestSwitch(t *testing.T) {
	if s := Read(nil); s.Paused || len(s.Groups) != 0 {
		t.Errorf("no ConfigMap must pause nothing: %+v", s)
	}
	cm := &corev1.ConfigMap{}
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	apply(t, cm, PausePatch("zone-b", "AZ maintenance", "alice", now))
	s := Read(cm)
	if held, why := s.Holds("zone-b"); !held || why != "group zone-b paused: AZ maintenance" {
		t.Errorf("zone-b: %v %q", held, why)
	}
	if held, _ := s.Holds("zone-a"); held {
		t.Error("zone-a held by zone-b's switch")
	}
	apply(t, cm, PausePatch("", "", "bob", now))
	s = Read(cm)
	if held, why := s.Holds("zone-a"); !held || why != "fleet paused: (no reason given)" || s.By != "bob" || !s.At.Equal(now) {
		t.Errorf("fleet: %v %q %+v", held, why, s)
	}
	apply(t, cm, ResumePatch(""))
	apply(t, cm, ResumePatch("zone-b"))
	if s := Read(cm); s.Paused || len(s.Groups) != 0 || len(cm.Data) != 0 {
		t.Errorf("resumed, but %+v / %v", s, cm.Data)
	}
	// Present with any value pauses: an empty reason still holds (fail closed).
	cm.Data = map[string]string{KeyPaused: ""}
	if !Read(cm).Paused {
		t.Error("paused with an empty reason must pause")
	}
}

// The Status stays readable across versions: what an older operator published reads, its copy of the
// settings (gone from the Status, now in the published policies) ignored, and the fields it lacks
// empty (the view then shows no ETA or stall countdown); a Status round-trips.
func TestStatusCompatible(t *testing.T) {
	old := `{"leader":"op-1","version":"v0.3.0","groupLabel":"zone","maxUnavailable":"1","maxUnavailablePerGroup":"1",` +
		`"maxUnavailableControlPlane":"1","controlPlaneOrder":"none","stallPolicy":"hold","windows":["Sat 00:00-06:00"],` +
		`"exclusions":["2026-12-24/2026-12-26"],"fluoWindow":{"start":"14:00","length":"1h","timeZone":"UTC"},` +
		`"blockers":[{"name":"alerts","reason":"firing","since":"2026-11-23T08:50:00Z"}],"failedReboots":["n1"],` +
		`"maxFailedReboots":3,"canaryNodes":1,"canaryBake":"10m0s","maxFailedPerVersion":1,"rebootTimeout":"30m0s","settleTime":"5m0s"}`
	st, ok := ReadStatus(&corev1.ConfigMap{Data: map[string]string{KeyStatus: old}})
	if !ok || st.Leader != "op-1" || st.Version != "v0.3.0" || len(st.Blockers) != 1 || st.Blockers[0].Reason != "firing" ||
		len(st.FailedReboots) != 1 || st.FailedReboots[0] != "n1" || st.CycleSeconds != nil {
		t.Errorf("an older operator's status read as %+v (%v)", st, ok)
	}
	want := `{"leader":"op-1","version":"v0.3.0","blockers":[{"name":"alerts","reason":"firing","since":"2026-11-23T08:50:00Z"}],"failedReboots":["n1"]}`
	if b, _ := json.Marshal(st); string(b) != want {
		t.Errorf("republished as %s, want %s", b, want)
	}
	st.CycleSeconds = []int{600, 900}
	b, _ := json.Marshal(st)
	back, ok := ReadStatus(&corev1.ConfigMap{Data: map[string]string{KeyStatus: string(b)}})
	if !ok || back.Leader != "op-1" || len(back.CycleSeconds) != 2 || back.CycleSeconds[1] != 900 {
		t.Errorf("round trip of %s: %+v", b, back)
	}
}
