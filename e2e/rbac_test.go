package e2e

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func hookRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "slipway-e2e-hook"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}}},
	}
}

func hookBinding() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "slipway-e2e-hook"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "slipway-e2e-hook"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "hook", Namespace: ns}},
	}
}

// apiPort is the API server's port as the VMs reach it through 10.0.2.2.
func apiPort() string {
	if cluster == nil {
		return ""
	}
	return fmt.Sprint(cluster.CP.Port)
}
