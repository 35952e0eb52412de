// Package v1alpha1 is Slipway's API group update.slipway.dev, version v1alpha1: RebootPolicy, a node
// pool's own reboot policy. The CRD (deploy/base/crd, the Helm chart) and zz_generated.deepcopy.go
// are generated from these types by controller-gen (`make generate`; TestGenerated fails when they
// are stale).
//
// +kubebuilder:object:generate=true
// +groupName=update.slipway.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is update.slipway.dev/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "update.slipway.dev", Version: "v1alpha1"}

// Resource is the rebootpolicies resource, as the dynamic client and RBAC name it.
var Resource = GroupVersion.WithResource("rebootpolicies")
