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

// The Status stays compatible both ways: what an older operator published reads with the new fields
// empty (the view then shows no ETA or stall countdown), and a Status without them publishes the same
// bytes as before, so an older view reads it unchanged.
func TestStatusCompatible(t *testing.T) {
	old := `{"leader":"op-1","maxUnavailable":"1","canaryNodes":1}`
	st, ok := ReadStatus(&corev1.ConfigMap{Data: map[string]string{KeyStatus: old}})
	if !ok || st.Leader != "op-1" || st.RebootTimeout != "" || st.SettleTime != "" || st.CycleSeconds != nil {
		t.Errorf("an older operator's status read as %+v (%v)", st, ok)
	}
	if b, _ := json.Marshal(st); string(b) != old {
		t.Errorf("republished as %s, want %s", b, old)
	}
	st.RebootTimeout, st.SettleTime, st.CycleSeconds = "30m0s", "5m0s", []int{600, 900}
	b, _ := json.Marshal(st)
	back, ok := ReadStatus(&corev1.ConfigMap{Data: map[string]string{KeyStatus: string(b)}})
	if !ok || back.RebootTimeout != "30m0s" || back.SettleTime != "5m0s" || len(back.CycleSeconds) != 2 || back.CycleSeconds[1] != 900 {
		t.Errorf("round trip of %s: %+v", b, back)
	}
}
