package status

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/slipway-dev/slipway/internal/fleetswitch"
)

// resume writes conditionally on what it read: when the operator pauses the fleet for its failure
// budget between resume's read and its write, the write conflicts, resume reads again, and the new
// pause survives (and is named). Every PATCH carries the resourceVersion it decided on.
func TestResumeIsConditional(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName, Namespace: "ns", ResourceVersion: "1"},
		Data: map[string]string{fleetswitch.KeyPaused: "incident 42", fleetswitch.KeyPausedBy: "alice"}}
	cs := fake.NewSimpleClientset(cm)
	// Between the read and the write, the operator's failure pause lands.
	patches := changedInBetween(t, cs, func(data map[string]string) {
		data[fleetswitch.KeyFailuresPaused] = "max-failed-reboots: 2 nodes failed"
	})
	var out bytes.Buffer
	c := &client{cs: cs}
	err := c.resume(context.Background(), &out, options{namespace: "ns"}, env{now: func() time.Time { return fixedNow }})
	if err != nil {
		t.Fatal(err)
	}
	if len(*patches) != 2 {
		t.Fatalf("%d patches, want 2 (one conflict, one retry)", len(*patches))
	}
	for i, want := range []string{"1", "2"} {
		md, _ := (*patches)[i]["metadata"].(map[string]any)
		if md["resourceVersion"] != want {
			t.Errorf("patch %d: resourceVersion %v, want %s (conditional on what was read)", i, md["resourceVersion"], want)
		}
	}
	got, _ := cs.CoreV1().ConfigMaps("ns").Get(context.Background(), fleetswitch.ConfigMapName, metav1.GetOptions{})
	sw := fleetswitch.Read(got)
	if sw.Paused || !sw.FailuresPaused {
		t.Errorf("after resume: person's pause %v (want gone), failure pause %v (want kept)", sw.Paused, sw.FailuresPaused)
	}
	if !strings.Contains(out.String(), "still held by the failure budget") {
		t.Errorf("resume did not say the failure pause stays: %q", out.String())
	}
}

// A colleague pauses again between this resume's read and its write: the resume does not lift a pause
// its person never saw. It stops, says so, and changes nothing.
func TestResumeKeepsAColleaguesPause(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetswitch.ConfigMapName, Namespace: "ns", ResourceVersion: "1"},
		Data: map[string]string{fleetswitch.KeyPaused: "incident 42", fleetswitch.KeyPausedBy: "alice"}}
	cs := fake.NewSimpleClientset(cm)
	patches := changedInBetween(t, cs, func(data map[string]string) {
		data[fleetswitch.KeyPaused] = "incident 43: database failover"
		data[fleetswitch.KeyPausedBy] = "bob"
	})
	var out bytes.Buffer
	err := (&client{cs: cs}).resume(context.Background(), &out, options{namespace: "ns"}, env{now: func() time.Time { return fixedNow }})
	if err == nil || !strings.Contains(err.Error(), "paused again by bob: incident 43") {
		t.Fatalf("resume over a colleague's new pause: %v (%s)", err, out.String())
	}
	if len(*patches) != 1 {
		t.Errorf("%d patches, want only the one that conflicted", len(*patches))
	}
	got, _ := cs.CoreV1().ConfigMaps("ns").Get(context.Background(), fleetswitch.ConfigMapName, metav1.GetOptions{})
	if sw := fleetswitch.Read(got); !sw.Paused || sw.By != "bob" {
		t.Errorf("bob's pause: %+v", sw)
	}
}

// changedInBetween makes the first PATCH of the fleet switch conflict after someone else changed its
// data (change), as a write between the resume's read and its write; it collects every PATCH sent.
func changedInBetween(t *testing.T, cs *fake.Clientset, change func(data map[string]string)) *[]map[string]any {
	var patches []map[string]any
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	cs.PrependReactor("patch", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		var m map[string]any
		_ = json.Unmarshal(a.(k8stesting.PatchAction).GetPatch(), &m)
		patches = append(patches, m)
		if len(patches) > 1 {
			return false, nil, nil
		}
		cur, _ := cs.Tracker().Get(gvr, "ns", fleetswitch.ConfigMapName)
		c := cur.(*corev1.ConfigMap).DeepCopy()
		change(c.Data)
		c.ResourceVersion = "2"
		if err := cs.Tracker().Update(gvr, c, "ns"); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, fleetswitch.ConfigMapName, nil)
	})
	return &patches
}
