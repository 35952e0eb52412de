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
