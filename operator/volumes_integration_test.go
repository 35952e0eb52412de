package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
)

// attach creates a VolumeAttachment of pv to node, as the attach/detach controller would.
func attach(t *testing.T, name, pv, node string) {
	t.Helper()
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr(pv)}},
	}
	if _, err := client.StorageV1().VolumeAttachments().Create(context.Background(), va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.StorageV1().VolumeAttachments().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// --wait-for-volume-detach: the node is drained, but reboot-ok waits (a WaitingForVolumeDetach Event
// says why) while a VolumeAttachment names it; one on another node does not hold it. Once the last
// goes, reboot-ok.
func TestWaitForVolumeDetach(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	for _, name := range []string{"vol-0", "vol-1"} {
		if _, err := testenv.CreateNode(ctx, client, name, "boot-a", nil); err != nil {
			t.Fatal(err)
		}
	}
	attach(t, "va-data", "pv-data", "vol-0")
	attach(t, "va-logs", "pv-logs", "vol-0")
	attach(t, "va-other", "pv-other", "vol-1")
	startOperator(t, opOptions{tweak: func(c *operator.Config) { c.Drain.WaitForVolumeDetach = true }})
	annotate(t, "vol-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	if !waitEvent(t, "vol-0", "WaitingForVolumeDetach") {
		t.Fatal("no WaitingForVolumeDetach Event: the drained node was not seen waiting for its volumes")
	}
	if n := getNode(t, "vol-0"); n.Annotations[protocol.RebootOK] == protocol.True || n.Annotations[protocol.DrainStarted] == "" {
		t.Fatalf("granted while VolumeAttachments name the node: %v", n.Annotations)
	}
	for _, va := range []string{"va-data", "va-logs"} {
		if err := client.StorageV1().VolumeAttachments().Delete(ctx, va, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitNode(t, "vol-0", 20*time.Second, "reboot-ok once no VolumeAttachment names it", func(n *corev1.Node) bool {
		return n.Annotations[protocol.RebootOK] == protocol.True
	})
}

// A volume that never detaches: after --volume-detach-timeout the wait is a failed drain (drain-error
// naming the VolumeAttachment, a DrainFailed Event), retried; under --drain-failure-policy=force the
// node is granted with a VolumeDetachForced Warning.
func TestVolumeDetachTimeout(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	if _, err := testenv.CreateNode(ctx, client, "stuckvol-0", "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	attach(t, "va-stuck", "pv-stuck", "stuckvol-0")
	stop := startOperator(t, opOptions{tweak: func(c *operator.Config) {
		c.Drain.WaitForVolumeDetach, c.Drain.VolumeDetachTimeout = true, 2*time.Second
	}})
	annotate(t, "stuckvol-0", map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	n := waitNode(t, "stuckvol-0", 30*time.Second, "drain-error naming the attached volume", func(n *corev1.Node) bool {
		return strings.Contains(n.Annotations[protocol.DrainError], "va-stuck (pv-stuck)")
	})
	if n.Annotations[protocol.RebootOK] == protocol.True {
		t.Fatal("granted under --drain-failure-policy=retry")
	}
	if !waitEvent(t, "stuckvol-0", "DrainFailed") {
		t.Error("no DrainFailed Event")
	}
	stop()
	startOperator(t, opOptions{policy: operator.DrainForce, tweak: func(c *operator.Config) {
		c.Drain.WaitForVolumeDetach, c.Drain.VolumeDetachTimeout = true, 2*time.Second
	}})
	waitNode(t, "stuckvol-0", 30*time.Second, "reboot-ok under force", func(n *corev1.Node) bool {
		return n.Annotations[protocol.RebootOK] == protocol.True
	})
	if !waitEvent(t, "stuckvol-0", "VolumeDetachForced") {
		t.Error("no VolumeDetachForced Event")
	}
}
