package nodes

import (
	"unique"

	corev1 "k8s.io/api/core/v1"
)

// Strip is an informer transform: it drops the parts of a Node neither binary reads, which keeps the
// operator's cache small on large fleets. What stays: metadata but managedFields (labels and
// annotations are the protocol), spec.unschedulable and spec.taints (--prefer-no-schedule-taint
// rewrites the list whole), the Ready condition, and of
// nodeInfo the boot ID (proof of a reboot) and machine ID (FleetLock's node ID). Container images can
// be tens of kilobytes per node and managedFields as much again; capacity and allocatable are maps of
// quantities; the other conditions carry long messages. Nothing writes a cached Node back whole
// (every write is a patch of the keys it changes), so what is dropped here is never lost on the
// server. Objects that are not Nodes pass through unchanged.
func Strip(obj interface{}) (interface{}, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	n.Spec = corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints}
	n.Status.Phase = ""
	n.Status.Images = nil
	n.Status.VolumesInUse = nil
	n.Status.VolumesAttached = nil
	n.Status.DaemonEndpoints = corev1.NodeDaemonEndpoints{}
	n.Status.Config = nil
	n.Status.Capacity = nil
	n.Status.Allocatable = nil
	n.Status.Addresses = nil
	n.Status.RuntimeHandlers = nil
	n.Status.Features = nil
	n.Status.NodeInfo = corev1.NodeSystemInfo{BootID: n.Status.NodeInfo.BootID, MachineID: n.Status.NodeInfo.MachineID}
	var ready []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			// The kubelet repeats the same few reasons and messages on every node.
			c.Reason, c.Message = intern(c.Reason, 128), intern(c.Message, 128)
			ready = append(ready, c)
		}
	}
	n.Status.Conditions = ready
	n.Labels = internMap(n.Labels)
	n.Annotations = internMap(n.Annotations)
	return n, nil
}

// internMap returns m with canonical copies of its keys and short values. Every cached Node carries
// the same label and annotation keys (FLUO's alone are ~45 bytes each) and mostly the same short
// values ("true", a version, a group), decoded into fresh strings for each object: shared, the
// cache of 5,000 nodes holds one copy of each. Long values (boot IDs, JSON) are mostly unique and kept.
func internMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[unique.Make(k).Value()] = intern(v, 24)
	}
	return out
}

// intern returns the canonical copy of s if it is at most max bytes long; longer ones are mostly
// unique (boot IDs, JSON) and stay as they are.
func intern(s string, max int) string {
	if len(s) > max {
		return s
	}
	return unique.Make(s).Value()
}
