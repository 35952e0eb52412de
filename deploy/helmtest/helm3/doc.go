// Package helm3 pins Helm 3 (`go tool helm` in this directory) for deploy/helmtest's TestHelm3: the
// chart must lint and render the same with Helm 3, which most users run, as with Helm 4. A module of
// its own because Helm 3 and Helm 4 need different versions of the same Kubernetes libraries.
package helm3
