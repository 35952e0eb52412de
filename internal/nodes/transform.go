package nodes

import (
	corev1 "k8s.io/api/core/v1"
)

// Strip is an informer transform: it drops the parts of a Node neither binary reads (container
// images can be tens of kilobytes per node, managedFields as much again), which keeps the operator's
// cache small on large fleets. Objects that are not Nodes pass through unchanged.
func Strip(obj interface{}) (interface{}, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	n.Status.Images = nil
	n.Status.VolumesInUse = nil
	n.Status.VolumesAttached = nil
	n.Status.DaemonEndpoints = corev1.NodeDaemonEndpoints{}
	n.Status.Config = nil
	return n, nil
}
