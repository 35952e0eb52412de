package operator

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/protocol"
)

// DefaultVolumeDetachTimeout is DrainConfig.VolumeDetachTimeout's default.
const DefaultVolumeDetachTimeout = 10 * time.Minute

// byNode indexes VolumeAttachments by the node they name.
const byNode = "node"

func vaByNode(obj interface{}) ([]string, error) {
	if va, ok := obj.(*storagev1.VolumeAttachment); ok && va.Spec.NodeName != "" {
		return []string{va.Spec.NodeName}, nil
	}
	return nil, nil
}

// attachedVolumes names the VolumeAttachments that still name node (sorted; nil when none).
func (c *Controller) attachedVolumes(node string) []string {
	objs, err := c.volumes.GetIndexer().ByIndex(byNode, node)
	if err != nil {
		return nil
	}
	var out []string
	for _, o := range objs {
		va := o.(*storagev1.VolumeAttachment)
		what := va.Name
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil {
			what += " (" + *pv + ")"
		}
		out = append(out, what)
	}
	sort.Strings(out)
	return out
}

// volumesHeld reports whether a drained node must wait for its VolumeAttachments to go before
// reboot-ok (--wait-for-volume-detach), and how soon to look again when only time will tell. After
// --volume-detach-timeout the wait counts as a failed drain: under --drain-failure-policy=force the
// node is granted anyway (an Event says so); otherwise the failure is recorded like any drain's
// (drain-error, DrainFailed, the metric) and the drain is tried again, then the wait.
func (c *Controller) volumesHeld(n *corev1.Node, log klog.Logger) (bool, time.Duration) {
	if c.volumes == nil {
		return false, 0
	}
	names := c.attachedVolumes(n.Name)
	if len(names) == 0 {
		return false, 0
	}
	cycle := n.Annotations[protocol.DrainStarted]
	r, ok := c.drains.result(n.Name, cycle)
	if !ok || r.err != nil {
		return false, 0 // a forced grant after a failed drain (drainDone said so)
	}
	waited := c.cfg.Now().Sub(r.at)
	timeout := c.cfg.Drain.VolumeDetachTimeout
	list := strings.Join(names, ", ")
	if waited < timeout {
		if c.drains.noteWaiting(n.Name, cycle, r.at) {
			log.Info("drained; waiting for VolumeAttachments to go before reboot-ok", "volumeAttachments", names, "timeout", timeout.String())
			c.cfg.Recorder.Eventf(n, corev1.EventTypeNormal, "WaitingForVolumeDetach", "drained; reboot-ok waits until no VolumeAttachment names the node (at most %s): %s", timeout, list)
		}
		return true, timeout - waited
	}
	if c.cfg.Drain.Policy == DrainForce {
		c.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, "VolumeDetachForced", "VolumeAttachments still name the node %s after the drain, granting reboot-ok anyway (--drain-failure-policy=force): %s", timeout, list)
		log.Info("volumes still attached after the timeout; granting anyway (--drain-failure-policy=force)", "volumeAttachments", names)
		return false, 0
	}
	c.drains.fail(n.Name, cycle, fmt.Errorf("VolumeAttachments still name the node %s after the drain (--volume-detach-timeout): %s", timeout, list))
	c.queue.Add(n.Name) // the failure is reported and the drain retried by the next sync
	return true, 0
}

// volumeHandler is the VolumeAttachment informer's handler: a change looks at the node it names again.
func (c *Controller) volumeHandler() cache.ResourceEventHandler {
	touch := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if va, ok := obj.(*storagev1.VolumeAttachment); ok && va.Spec.NodeName != "" {
			c.queue.Add(va.Spec.NodeName)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: touch, UpdateFunc: func(_, o interface{}) { touch(o) }, DeleteFunc: touch}
}
