// Package remediationfence proves Slipway's remediation fence with the remediators' own code: medik8s'
// lease manager (github.com/medik8s/common/pkg/lease, what NodeHealthCheck asks before it remediates a
// node) and Cluster API's annotation predicate (sigs.k8s.io/cluster-api/util/annotations, what
// MachineHealthCheck's shouldSkipRemediation calls) decide whether the node of a cycle may be
// remediated, while the real update-operator binary holds the fence and is killed (SIGKILL) mid-cycle.
// It lives in the e2e module so the operator's own module does not depend on either project.
package remediationfence
