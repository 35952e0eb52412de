package operator

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// byNode indexes VolumeAttachments by the node they name.
const byNode = "node"

func vaByNode(obj interface{}) ([]string, error) {
	if va, ok := obj.(*storagev1.VolumeAttachment); ok && va.Spec.NodeName != "" {
		return []string{va.Spec.NodeName}, nil
	}
	return nil, nil
}

// attachedVolumes names the VolumeAttachments that still name node (sorted; nil when none): wait
// those the drain waits for, kept those of the PersistentVolumes in staying (pods that stay on the
// node use them, so they stay attached through the reboot). An attachment of an inline volume names
// no PersistentVolume and is waited for.
func (g *gates) attachedVolumes(node string, staying map[string]bool) (wait, kept []string) {
	objs, err := g.volumes.GetIndexer().ByIndex(byNode, node)
	if err != nil {
		return nil, nil
	}
	for _, o := range objs {
		va := o.(*storagev1.VolumeAttachment)
		what := va.Name
		pv := va.Spec.Source.PersistentVolumeName
		if pv != nil {
			what += " (" + *pv + ")"
		}
		if pv != nil && staying[*pv] {
			kept = append(kept, what)
		} else {
			wait = append(wait, what)
		}
	}
	sort.Strings(wait)
	sort.Strings(kept)
	return wait, kept
}

// stayingVolumes returns the PersistentVolumes that the pods still on node after its drain use: the
// pods --drain-pod-selector does not select, DaemonSet and mirror pods. Their volumes stay attached
// through the reboot; a wait for them would never end (and under --drain-failure-policy=retry
// would retry for ever). Pods being deleted and finished pods are not staying: their volumes go.
func stayingVolumes(ctx context.Context, c kubernetes.Interface, node string) (map[string]bool, error) {
	pods, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	staying := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			var claim string
			switch {
			case v.PersistentVolumeClaim != nil:
				claim = v.PersistentVolumeClaim.ClaimName
			case v.Ephemeral != nil:
				claim = p.Name + "-" + v.Name // the generic ephemeral volume's claim, named by Kubernetes
			default:
				continue
			}
			pvc, err := c.CoreV1().PersistentVolumeClaims(p.Namespace).Get(ctx, claim, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if pvc.Spec.VolumeName != "" {
				staying[pvc.Spec.VolumeName] = true
			}
		}
	}
	return staying, nil
}

// volumesHeld reports whether a drained node must wait for its VolumeAttachments to go before
// reboot-ok (--wait-for-volume-detach; not those pods that stay on the node use), and how soon to look again when only time will tell. After
// --volume-detach-timeout the wait counts as a failed drain: under --drain-failure-policy=force the
// node is granted anyway (an Event says so); otherwise the failure is recorded like any drain's
// (drain-error, DrainFailed, the metric) and the drain is tried again, then the wait.
func (c *Controller) volumesHeld(v view, log klog.Logger) (bool, time.Duration) {
	if c.gates.volumes == nil {
		return false, 0
	}
	n, r := v.n, v.drain
	cycle := n.Annotations[protocol.DrainStarted]
	if !v.drained || r.err != nil {
		return false, 0 // a forced grant after a failed drain (drainDone said so)
	}
	names, kept := c.gates.attachedVolumes(n.Name, r.staying)
	if len(names) == 0 {
		return false, 0
	}
	waited := time.Since(r.at) // the drainer's wall clock, as it dated the attempt
	timeout := c.cfg.Drain.VolumeDetachTimeout
	list := strings.Join(names, ", ")
	if waited < timeout {
		if c.drains.noteWaiting(n.Name, cycle, r.at) {
			also := ""
			if len(kept) > 0 {
				also = "; not for those of pods that stay on the node: " + strings.Join(kept, ", ")
			}
			log.Info("drained; waiting for VolumeAttachments to go before reboot-ok", "volumeAttachments", names, "staying", kept, "timeout", timeout.String())
			c.cfg.Recorder.Eventf(n, corev1.EventTypeNormal, "WaitingForVolumeDetach", "drained; reboot-ok waits until no VolumeAttachment of the evicted pods' volumes names the node (at most %s): %s%s", timeout, list, also)
		}
		return true, timeout - waited
	}
	if v.pol.Drain.Policy == DrainForce {
		c.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "VolumeDetachForced", "VolumeAttachments still name the node %s after the drain, granting reboot-ok anyway (--drain-failure-policy=force): %s", timeout, list)
		log.Info("volumes still attached after the timeout; granting anyway (--drain-failure-policy=force)", "volumeAttachments", names)
		return false, 0
	}
	c.drains.fail(n.Name, cycle, fmt.Errorf("VolumeAttachments still name the node %s after the drain (--volume-detach-timeout): %s", timeout, list))
	c.queue.Add(n.Name) // the failure is reported and the drain retried by the next sync
	return true, 0
}
