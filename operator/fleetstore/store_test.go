package fleetstore

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/internal/history"
)

var t0 = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

// No API call is made while the store's lock is held: every request the store sends finds the lock
// free. A lock held across a request would stall every admission (they read the memory under it)
// for as long as the API server takes to answer.
func TestNoLockAcrossAPICalls(t *testing.T) {
	client := fake.NewSimpleClientset()
	var s *Store
	calls := 0
	client.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if !s.mu.TryLock() {
			t.Errorf("%s %s sent while the store's lock is held", a.GetVerb(), a.GetResource().Resource)
			return false, nil, nil
		}
		s.mu.Unlock()
		return false, nil, nil
	})
	var err error
	s, err = New(Config{Client: client, Namespace: "slipway-system", Log: klog.Background(), Now: func() time.Time { return t0 },
		MaxFailedReboots: 1, Status: fleetswitch.Status{Leader: "me"}, Policies: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.StartPausedForTest(ctx); err != nil {
		t.Fatal(err)
	}
	s.Learn(func(r *fleetrecord.Record) bool {
		return r.AddFailure(fleetrecord.Failure{Node: "n1", UID: "u1", Reason: fleetrecord.ReasonStalled, At: t0, Budget: true, Why: "stalled"})
	})
	s.Ended(history.Cycle{Node: "n1", UID: "u1", Result: history.Finished, Ended: t0})
	s.NoteCycle(10 * time.Minute)
	s.NoteBlockers(map[string]string{"alerts": "firing"})
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	s.Flush(ctx)
	if calls < 4 {
		t.Fatalf("%d requests: the store wrote less than the record, the status and the history", calls)
	}
	cm, err := client.CoreV1().ConfigMaps("slipway-system").Get(ctx, fleetswitch.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fleetswitch.ReadStatus(cm)
	if !ok || st.Leader != "me" || len(st.FailedReboots) != 1 || len(st.Blockers) != 1 || len(st.CycleSeconds) != 1 {
		t.Errorf("published %+v", st)
	}
	if !fleetswitch.Read(cm).FailuresPaused {
		t.Errorf("the failure budget (1) is spent and the fleet is not paused: %v", cm.Data)
	}
	for _, name := range []string{fleetrecord.ConfigMapName, history.ConfigMapName} {
		if _, err := client.CoreV1().ConfigMaps("slipway-system").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s not written: %v", name, err)
		}
	}
}

// StartPausedForTest creates the paused switch without waiting for an informer (none runs here).
func (s *Store) StartPausedForTest(ctx context.Context) error {
	_, err := s.cfg.Client.CoreV1().ConfigMaps(s.cfg.Namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName, Namespace: s.cfg.Namespace}}, metav1.CreateOptions{})
	return err
}

// Versions the store cannot read (a hand edit gone wrong) hold every version and are never written
// over: read as empty they would lift every halt a person set in them.
func TestUnreadableVersionsHold(t *testing.T) {
	const bad = `{"seen":[{"version":"4600.0.0"}],"halts":[{"version":"4600.1.0","by":"alice","at":"2026-11-27T10:00:00Z"}]}`
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetrecord.ConfigMapName, Namespace: "slipway-system", ResourceVersion: "5"},
		Data: map[string]string{fleetrecord.VersionsKey: bad}}
	client := fake.NewSimpleClientset(cm)
	s, err := New(Config{Client: client, Namespace: "slipway-system", Log: klog.Background(), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Seed(cm); err != nil {
		t.Fatal(err)
	}
	s.Load(nil)
	v := s.View()
	if h, ok := v.VersionHalt("4700.0.0"); !ok || !strings.Contains(h.Why, "cannot be read") {
		t.Errorf("an unreadable versions key held nothing: %+v %v", h, ok)
	}
	if got := v.HaltsInForce(); len(got) != 1 {
		t.Errorf("halts in force: %v", got)
	}
	s.See("4800.0.0", "n1", t0)
	if _, err := s.WriteRecord(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().ConfigMaps("slipway-system").Get(context.Background(), fleetrecord.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data[fleetrecord.VersionsKey] != bad {
		t.Errorf("the unreadable versions were written over: %s", got.Data[fleetrecord.VersionsKey])
	}
}
