package protocol

import corev1 "k8s.io/api/core/v1"

// ControlPlaneLabel marks control-plane nodes (kubeadm and most distributions set it); they have a
// budget of their own.
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

// IsControlPlane reports whether the node carries ControlPlaneLabel (any value).
func IsControlPlane(n *corev1.Node) bool { _, ok := n.Labels[ControlPlaneLabel]; return ok }

// BudgetGroup is the budget group of a node: the value of its groupLabel (the operator's
// --group-label) when it carries it; else the group its FleetLock client asked in (Zincati's
// "group", FleetLockGroup); else "" (the nodes without a group form one group). The label wins
// because an admin set it on purpose; a Zincati group is the node's own choice.
func BudgetGroup(n *corev1.Node, groupLabel string) string {
	if groupLabel != "" {
		if g, ok := n.Labels[groupLabel]; ok {
			return g
		}
	}
	return n.Annotations[FleetLockGroup]
}
