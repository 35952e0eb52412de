// Package helmtest proves the Helm chart in deploy/helm/slipway. Rendered with Helm's own library
// (helm.sh/helm/v4, what `helm template` runs), its default values yield exactly the objects kustomize
// (sigs.k8s.io/kustomize/api) renders from deploy/, fleetlock.enabled exactly deploy/fleetlock/, and
// agent.rebootRequiredFile exactly deploy/ plus the deploy/reboot-required-file component. The
// project's own `kubectl kustomize` (an older kustomize) renders the same, but for the namespace it
// puts on the cluster-scoped admission policies. Each value changes what it should and nothing else,
// bad values are refused, and `helm lint --strict` finds nothing.
//
// It is a module of its own so that Helm's and kustomize's dependencies stay out of the binaries'
// go.mod. `make test` runs it; `make helm` lints and renders the chart with the same pinned Helm.
package helmtest
