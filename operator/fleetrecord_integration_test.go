package operator_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
	"github.com/slipway-dev/slipway/operator"
)

// A deleted fleet record is written again by the running leader, from its memory (here a person's
// resume it read from the record): the next leader would otherwise rebuild from the Nodes' marks
// only, and a deleted Node's halts and failures would be lost. A resume dated in the future is not
// taken into memory, and the record written next no longer has it.
func TestDeletedFleetRecordWrittenAgain(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const ns = "slipway-record-again"
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_ = client.CoreV1().ConfigMaps(ns).Delete(ctx, fleetrecord.ConfigMapName, metav1.DeleteOptions{})
	// A person's resume, and one dated in 2100 (which would forgive every failure of 4500.6.0 until then):
	// the operator takes the first into its memory and drops the second.
	resumed := fleetrecord.Record{Resumes: []fleetrecord.Resume{{Version: "4500.6.0", By: "ops", At: time.Now().Add(-time.Hour).UTC().Truncate(time.Second), Why: "tested"},
		{Version: "4500.6.0", By: "mallory", At: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}}}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetrecord.ConfigMapName},
		Data: map[string]string{fleetrecord.Key: resumed.Encode()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startOperator(t, opOptions{tweak: func(c *operator.Config) { c.Namespace = ns }})
	stored := func() (fleetrecord.Record, bool) {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, fleetrecord.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return fleetrecord.Record{}, false
		}
		r, err := fleetrecord.Decode(cm.Data[fleetrecord.Key])
		if err != nil {
			t.Fatal(err)
		}
		return r, true
	}
	// A fleet sync read the record (and merged it into the operator's memory) before it published the
	// fleet status.
	statusPublished := func() bool {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, fleetswitch.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		_, ok := fleetswitch.ReadStatus(cm)
		return ok
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r, ok := stored(); ok && len(r.Resumes) == 1 && r.Resumes[0].By == "ops" && statusPublished() {
			break
		}
		if time.Now().After(deadline) {
			r, _ := stored()
			t.Fatalf("the operator never published its fleet status with the record holding ops' resume alone: %+v", r.Resumes)
		}
	}
	if err := client.CoreV1().ConfigMaps(ns).Delete(ctx, fleetrecord.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r, ok := stored(); ok && len(r.Resumes) == 1 && r.Resumes[0].By == "ops" {
			return
		}
		if time.Now().After(deadline) {
			r, ok := stored()
			t.Fatalf("after its deletion: record %+v (there: %v), want it written again with the resume", r, ok)
		}
	}
}
