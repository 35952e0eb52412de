// Package version holds the version both binaries report. The Makefile stamps it with
// -ldflags "-X github.com/slipway-dev/slipway/internal/version.Version=..."; a plain `go build`
// falls back to the module version Go recorded, else "v0.0.0-dev".
package version

import "runtime/debug"

// Version is stamped at build time.
var Version = ""

// String returns the stamped version or the best fallback.
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "v0.0.0-dev"
}
