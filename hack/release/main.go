// Command release writes one release of Slipway into a directory (`make release VERSION=vX.Y.Z`,
// default dist/):
//
//	slipway-V.oci.tar                    the image for linux/amd64 and linux/arm64, one OCI image index
//	install.yaml, install-fleetlock.yaml `kubectl kustomize deploy/` (and deploy/fleetlock/) with the
//	                                     image at IMAGE:V@sha256:D: `kubectl apply -f install.yaml`
//	node-prep.yaml                       deploy/node-prep, pinned the same way: prepares running nodes
//	*.ign                                butane/snippets' Ignition configs, for nodes' configs and
//	                                     `update-agent node-config apply`
//	slipway-X.Y.Z.tgz                    the Helm chart, version X.Y.Z, appVersion and image.tag V,
//	                                     image.digest sha256:D
//	kubectl-slipway_V_OS_ARCH.tar.gz     the status plugin (binary + LICENSE), linux and darwin,
//	                                     amd64 and arm64
//	update-agent_V_linux_ARCH.tar.gz     the agent, for `update-agent node-config apply` (Linux only:
//	                                     the apply stays inside --root with openat2/renameat2)
//	*.cdx.json                           a CycloneDX SBOM per binary, read from the binary's own build
//	                                     information (what `go version -m` prints)
//	slipway.yaml                         the krew plugin manifest for kubectl-slipway
//	SHA256SUMS                           `sha256sum -c SHA256SUMS` checks every file above
//
// D is the digest of the image index in slipway-V.oci.tar, read back from the archive: what the
// manifests and the chart pull is exactly the image of the release, not whatever a tag names later
// (push it with `skopeo copy --all --preserve-digests` so the registry serves the same digest).
//
// It runs go build and hack/build-image.sh (with hack/ociimage) from the repository (-repo) and says
// what it is doing with the elapsed time. A working tree with uncommitted changes or untracked files
// that are not ignored is refused before anything is written: a release is its commit. -allow-dirty
// (development and tests) builds anyway and marks the version V-dirty. An existing -out directory is
// replaced only when it holds an earlier release (its SHA256SUMS); anything else there is refused,
// never deleted.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"time"
)

// Exit codes: 0 written, 1 a step failed, 2 bad flags.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c Config
	fs.StringVar(&c.Version, "version", "", "the release's version, vMAJOR.MINOR.PATCH[-PRERELEASE] (required)")
	fs.StringVar(&c.Repo, "repo", "../..", "the Slipway repository to build from")
	fs.StringVar(&c.Out, "out", "", "where to write the release (default: REPO/dist)")
	fs.StringVar(&c.Image, "image", DefaultImage, "the image repository install.yaml and the chart pull")
	fs.StringVar(&c.Download, "download", DefaultDownload, "the URL the release's files are published under (the krew manifest's uri: DOWNLOAD/VERSION/FILE)")
	fs.BoolVar(&c.AllowDirty, "allow-dirty", false, "build from a working tree with uncommitted or untracked files anyway, as VERSION"+DirtySuffix+" (development and tests only; never publish it)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "release: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if err := c.check(); err != nil {
		fmt.Fprintf(stderr, "release: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	start := time.Now()
	r, err := Build(c, func(step string) {
		log.Info("release: "+step, "elapsed", time.Since(start).Round(100*time.Millisecond).String())
	})
	if err != nil {
		log.Error("release failed", "err", err)
		return exitError
	}
	log.Info("release written", "version", r.Version, "image", r.Image, "dir", c.Out, "files", len(r.Files), "elapsed", time.Since(start).Round(time.Second).String())
	return exitOK
}

const (
	DefaultImage    = "ghcr.io/slipway-dev/slipway"
	DefaultDownload = "https://github.com/slipway-dev/slipway/releases/download"
)

// Config is one release.
type Config struct {
	Version  string
	Repo     string
	Out      string
	Image    string
	Download string
	// AllowDirty builds from a working tree that is not its commit, with Version marked DirtySuffix.
	AllowDirty bool
}

// semver is vMAJOR.MINOR.PATCH[-PRERELEASE] as SemVer 2 has it (no build metadata: image tags refuse '+').
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// imageRepo is an image repository without tag or digest.
var imageRepo = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+$`)

func (c *Config) check() error {
	switch {
	case c.Version == "":
		return errors.New("-version is required (e.g. -version v0.4.0)")
	case !semver.MatchString(c.Version):
		return fmt.Errorf("-version %q: want vMAJOR.MINOR.PATCH[-PRERELEASE], e.g. v0.4.0 or v0.4.0-rc.1 (the chart's version must be SemVer)", c.Version)
	case !imageRepo.MatchString(c.Image):
		return fmt.Errorf("-image %q: want an image repository without tag, e.g. %s", c.Image, DefaultImage)
	case c.Download == "":
		return errors.New("-download must not be empty")
	}
	if c.Out == "" {
		c.Out = c.Repo + "/dist"
	}
	return nil
}
