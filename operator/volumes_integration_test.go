package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/operator"
	"github.com/slipway-dev/slipway/operator/policy"
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
	startOperator(t, opOptions{spec: func(s *policy.Spec) { s.Drain.WaitForVolumeDetach = true }})
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
	stop := startOperator(t, opOptions{spec: func(s *policy.Spec) {
		s.Drain.WaitForVolumeDetach, s.Drain.VolumeDetachTimeout = true, metav1.Duration{Duration: 2 * time.Second}
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
	startOperator(t, opOptions{policy: operator.DrainForce, spec: func(s *policy.Spec) {
		s.Drain.WaitForVolumeDetach, s.Drain.VolumeDetachTimeout = true, metav1.Duration{Duration: 2 * time.Second}
	}})
	waitNode(t, "stuckvol-0", 30*time.Second, "reboot-ok under force", func(n *corev1.Node) bool {
		return n.Annotations[protocol.RebootOK] == protocol.True
	})
	if !waitEvent(t, "stuckvol-0", "VolumeDetachForced") {
		t.Error("no VolumeDetachForced Event")
	}
}

// claimBoundTo creates PersistentVolumeClaim ns/name bound to pv (as the PV controller would have it).
func claimBoundTo(t *testing.T, ns, name, pv string) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: pv,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// --drain-pod-selector with --wait-for-volume-detach under --drain-failure-policy=retry: the pods the
// selector leaves on the node keep their volumes attached through the reboot (a claim, and a
// generic ephemeral volume's claim), so the wait is only for the volume of the pod the drain evicted;
// once its VolumeAttachment goes, reboot-ok, while the others still name the node. Waiting for
// every attachment of the node (before) never ended: each --volume-detach-timeout a failed drain,
// retried for ever.
func TestVolumeDetachWaitsOnlyForEvictedPods(t *testing.T) {
	needCluster(t)
	cleanNodes(t)
	ctx := context.Background()
	const node, ns = "selvol-0", "selvol"
	if _, err := testenv.CreateNode(ctx, client, node, "boot-a", nil); err != nil {
		t.Fatal(err)
	}
	_, _ = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	t.Cleanup(func() {
		zero := int64(0)
		_ = client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = client.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = client.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	claimBoundTo(t, ns, "web-data", "pv-web")
	claimBoundTo(t, ns, "db-data", "pv-db")
	claimBoundTo(t, ns, "db-0-scratch", "pv-db-scratch") // the ephemeral volume "scratch" of pod db-0
	labels := map[string]string{"app": "web"}
	rs, err := client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/app:1"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(name string) corev1.Volume {
		return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}
	}
	web := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: ns, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/app:1"}}, Volumes: []corev1.Volume{claim("web-data")}},
	}
	scratch := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}}}
	db := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: ns, Labels: map[string]string{"app": "db"}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/db:1"}}, Volumes: []corev1.Volume{claim("db-data"), scratch}},
	}
	for _, p := range []*corev1.Pod{web, db} {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := testenv.WaitPodsRunning(ctx, client, ns, "app in (web,db)", 2); err != nil {
		t.Fatal(err)
	}
	attach(t, "va-web", "pv-web", node)
	attach(t, "va-db", "pv-db", node)
	attach(t, "va-db-scratch", "pv-db-scratch", node)
	startOperator(t, opOptions{spec: func(s *policy.Spec) {
		s.Drain.PodSelector = "app=web"
		s.Drain.WaitForVolumeDetach, s.Drain.VolumeDetachTimeout = true, metav1.Duration{Duration: 3 * time.Second}
	}})
	annotate(t, node, map[string]*string{protocol.RebootNeeded: ptr(protocol.True)})
	if !waitEvent(t, node, "WaitingForVolumeDetach") {
		t.Fatal("no WaitingForVolumeDetach Event: the drained node was not seen waiting for the evicted pod's volume")
	}
	l, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node + ",reason=WaitingForVolumeDetach"})
	if err != nil {
		t.Fatal(err)
	}
	if msg := l.Items[0].Message; !strings.Contains(msg, "): va-web (pv-web); not for those of pods that stay on the node: va-db (pv-db), va-db-scratch (pv-db-scratch)") {
		t.Errorf("the Event does not say it waits for va-web only: %q", msg)
	}
	if n := getNode(t, node); n.Annotations[protocol.RebootOK] == protocol.True {
		t.Fatal("granted while the evicted pod's volume is attached")
	}
	if err := client.StorageV1().VolumeAttachments().Delete(ctx, "va-web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n := waitNode(t, node, 20*time.Second, "reboot-ok once the evicted pod's volume detached (the staying pod's still attached)", func(n *corev1.Node) bool {
		return n.Annotations[protocol.RebootOK] == protocol.True
	})
	if strings.Contains(n.Annotations[protocol.DrainError], "va-db") {
		t.Errorf("a failed drain named the staying pod's volume: %q", n.Annotations[protocol.DrainError])
	}
	if p, err := client.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the unselected pod did not stay: %v", err)
	}
}
