package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Binary is one shipped command and the platforms it is built for.
type Binary struct {
	Name      string
	Package   string
	Platforms []string // os/arch
}

// Binaries are the commands shipped outside the image.
var Binaries = []Binary{
	{"kubectl-slipway", "./operator/cmd/kubectl-slipway", []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}},
	// Linux only: node-config apply stays inside --root with openat2 and renameat2.
	{"update-agent", "./agent/cmd/update-agent", []string{"linux/amd64", "linux/arm64"}},
}

// ImagePlatforms are the image index's platforms.
var ImagePlatforms = []string{"linux/amd64", "linux/arm64"}

// Manifests are the rendered kustomize directories: file name → directory under deploy/.
var Manifests = []struct{ File, Dir string }{
	{"install.yaml", "deploy"},
	{"install-fleetlock.yaml", "deploy/fleetlock"},
	{"node-prep.yaml", "deploy/node-prep"}, // docs/install.md "Preparing running nodes"
}

// Snippets are the Ignition configs of butane/snippets the release carries as they are, for new
// nodes' configs (merge them) and `update-agent node-config apply` on running ones.
var Snippets = []string{"flatcar-slipway.ign", "flatcar-new-node.ign", "flatcar-slipway.clc.ign", "fcos-fleetlock.ign"}

// Overlays are rendered kustomize directories that name no image: file name → directory under deploy/.
// The FLUO migration's overlay (docs/migrate.md, path A: apply it, and delete it to roll back).
var Overlays = []struct{ File, Dir string }{
	{"fluo-migration.yaml", "deploy/fluo-migration"},
}

// SumsFile lists the SHA-256 of every other file of the release.
const SumsFile = "SHA256SUMS"

// ArchiveName is a binary's archive in the release.
func ArchiveName(name, version, platform string) string {
	return fmt.Sprintf("%s_%s_%s.tar.gz", name, version, strings.ReplaceAll(platform, "/", "_"))
}

// SBOMName is a binary's SBOM in the release.
func SBOMName(name, version, platform string) string {
	return fmt.Sprintf("%s_%s_%s.cdx.json", name, version, strings.ReplaceAll(platform, "/", "_"))
}

// ImageName is the image archive in the release.
func ImageName(version string) string { return "slipway-" + version + ".oci.tar" }

// ChartName is the packaged chart in the release.
func ChartName(version string) string { return "slipway-" + strings.TrimPrefix(version, "v") + ".tgz" }

// Release is what Build wrote.
type Release struct {
	Version string   // -version, with DirtySuffix when built from uncommitted changes (-allow-dirty)
	Image   string   // the reference every manifest and the chart pull: PinnedImage
	Files   []string // the files' names, SHA256SUMS last
}

// Build writes the release c describes. A working tree that is not its commit is refused (unless
// c.AllowDirty) before anything in c.Out is touched.
func Build(c Config, progress func(string)) (Release, error) {
	repo, err := filepath.Abs(c.Repo)
	if err != nil {
		return Release{}, err
	}
	if _, err := os.Stat(filepath.Join(repo, "deploy", "helm", "slipway", "Chart.yaml")); err != nil {
		return Release{}, fmt.Errorf("-repo %s is not a Slipway repository: %w", c.Repo, err)
	}
	note, err := checkTree(repo, &c)
	if err != nil {
		return Release{}, err
	}
	if note != "" {
		progress(note)
	}
	files, ref, err := build(c, repo, progress)
	return Release{Version: c.Version, Image: ref, Files: files}, err
}

// build writes the release from repo, whose tree checkTree has passed, and returns its files' names
// (SHA256SUMS last) and the pinned image reference.
func build(c Config, repo string, progress func(string)) ([]string, string, error) {
	out, err := filepath.Abs(c.Out)
	if err != nil {
		return nil, "", err
	}
	if err := prepareOut(out); err != nil {
		return nil, "", err
	}
	work, err := os.MkdirTemp("", "slipway-release-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(work)
	license, err := os.ReadFile(filepath.Join(repo, "LICENSE"))
	if err != nil {
		return nil, "", fmt.Errorf("the release ships LICENSE: %w", err)
	}

	// The image and the binaries of each platform build at once: on a small machine a go build spends
	// much of its time in single-threaded links, which overlap here. One go build per platform builds
	// all of that platform's binaries (it links them in parallel, too).
	progress("building the image (" + strings.Join(ImagePlatforms, ", ") + ") with hack/build-image.sh, and " + strings.Join(binaryPlatforms(), ", ") + " binaries")
	type built struct {
		files []string          // the image's files in out
		bins  map[string]string // a platform's binaries: name → path
		err   error
	}
	image := make(chan built, 1)
	go func() {
		f, err := buildImage(repo, work, out, c)
		image <- built{files: f, err: err}
	}()
	platforms := binaryPlatforms()
	results := make([]chan built, len(platforms))
	slots := make(chan struct{}, runtime.NumCPU())
	for i, p := range platforms {
		results[i] = make(chan built, 1)
		go func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			bins, err := goBuild(repo, work, p, c.Version)
			if err == nil {
				progress("built " + p)
			}
			results[i] <- built{bins: bins, err: err}
		}()
	}
	// Every build has ended before anything is written or returned: none outlives work.
	img := <-image
	errs := []error{img.err}
	bins := make([]map[string]string, len(platforms))
	for i := range platforms {
		r := <-results[i]
		bins[i] = r.bins
		errs = append(errs, r.err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, "", err
	}
	var files []string
	for i, p := range platforms {
		for _, b := range Binaries {
			if !slices.Contains(b.Platforms, p) {
				continue
			}
			bin := bins[i][b.Name]
			data, err := os.ReadFile(bin)
			if err != nil {
				return nil, "", err
			}
			archive := ArchiveName(b.Name, c.Version, p)
			if err := writeFile(out, archive, tarGz([]tarEntry{{b.Name, 0o755, data}, {"LICENSE", 0o644, license}})); err != nil {
				return nil, "", err
			}
			sbom, err := SBOM(bin, b.Name, c.Version)
			if err != nil {
				return nil, "", fmt.Errorf("SBOM of %s %s: %w", b.Name, p, err)
			}
			if err := writeFile(out, SBOMName(b.Name, c.Version, p), sbom); err != nil {
				return nil, "", err
			}
			files = append(files, archive, SBOMName(b.Name, c.Version, p))
		}
	}
	files = append(files, img.files...)

	// Everything the release installs pulls the image it just built, by that image's digest: a tag
	// is a name anyone with push access can point elsewhere.
	digest, err := ImageDigest(filepath.Join(out, ImageName(c.Version)))
	if err != nil {
		return nil, "", fmt.Errorf("the digest of the image built: %w", err)
	}
	ref := PinnedImage(c.Image, c.Version, digest)
	progress("pinning " + ref)

	for _, m := range Manifests {
		progress("rendering " + m.File + " from " + m.Dir + "/")
		y, err := renderManifest(filepath.Join(repo, m.Dir), c, ref)
		if err != nil {
			return nil, "", err
		}
		if err := writeFile(out, m.File, y); err != nil {
			return nil, "", err
		}
		files = append(files, m.File)
	}
	for _, m := range Overlays {
		progress("rendering " + m.File + " from " + m.Dir + "/")
		y, err := renderOverlay(filepath.Join(repo, m.Dir), c)
		if err != nil {
			return nil, "", err
		}
		if err := writeFile(out, m.File, y); err != nil {
			return nil, "", err
		}
		files = append(files, m.File)
	}

	for _, name := range Snippets {
		data, err := os.ReadFile(filepath.Join(repo, "butane", "snippets", name))
		if err != nil {
			return nil, "", fmt.Errorf("the snippet %s (make butane writes it): %w", name, err)
		}
		if err := writeFile(out, name, data); err != nil {
			return nil, "", err
		}
		files = append(files, name)
	}

	progress("packaging the Helm chart")
	chart, err := PackageChart(filepath.Join(repo, "deploy", "helm", "slipway"), out, c, digest)
	if err != nil {
		return nil, "", err
	}
	files = append(files, chart)

	progress("writing the krew manifest")
	krew, err := KrewManifest(c, out)
	if err != nil {
		return nil, "", err
	}
	if err := writeFile(out, KrewFile, krew); err != nil {
		return nil, "", err
	}
	files = append(files, KrewFile)

	slices.Sort(files)
	progress("writing " + SumsFile)
	sums, err := Sums(out, files)
	if err != nil {
		return nil, "", err
	}
	if err := writeFile(out, SumsFile, sums); err != nil {
		return nil, "", err
	}
	return append(files, SumsFile), ref, nil
}

// prepareOut makes out an empty directory: missing, empty, or an earlier release (it has SHA256SUMS
// and nothing that file does not list). Anything else is someone's and is refused.
func prepareOut(out string) error {
	entries, err := os.ReadDir(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(out, 0o755)
	case err != nil:
		return err
	case len(entries) == 0:
		return nil
	}
	sums, err := os.ReadFile(filepath.Join(out, SumsFile))
	if err != nil {
		return fmt.Errorf("%s is not empty and holds no earlier release (no %s): remove it or choose another -out", out, SumsFile)
	}
	listed := map[string]bool{SumsFile: true}
	for _, l := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		if _, name, ok := strings.Cut(l, "  "); ok {
			listed[name] = true
		}
	}
	for _, e := range entries {
		if !listed[e.Name()] {
			return fmt.Errorf("%s holds %s, which its %s does not list: remove it or choose another -out", out, e.Name(), SumsFile)
		}
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(out, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// binaryPlatforms are the platforms of Binaries, in the order they first appear.
func binaryPlatforms() []string {
	var ps []string
	for _, b := range Binaries {
		for _, p := range b.Platforms {
			if !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// goBuild builds every binary shipped for platform p, as make build does (static, -trimpath,
// version-stamped), in one go build, and returns their paths by name.
func goBuild(repo, work, p, version string) (map[string]string, error) {
	goos, goarch, _ := strings.Cut(p, "/")
	dir := filepath.Join(work, "bin", goos+"_"+goarch)
	// The commit goes into the build information (and so the SBOM) where there is one; -trimpath keeps
	// -ldflags out of it, so the version is checked in the binary itself.
	vcs := "-buildvcs=false"
	if exec.Command("git", "-C", repo, "rev-parse", "HEAD").Run() == nil {
		vcs = "-buildvcs=true"
	}
	args := []string{"build", "-trimpath", vcs,
		"-ldflags", "-s -w -X github.com/slipway-dev/slipway/internal/version.Version=" + version,
		"-o", dir + string(filepath.Separator)}
	bins := map[string]string{}
	for _, b := range Binaries {
		if slices.Contains(b.Platforms, p) {
			args = append(args, b.Package)
			bins[b.Name] = filepath.Join(dir, b.Name)
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build for %s: %v\n%s", p, err, out)
	}
	return bins, nil
}

// buildImage runs hack/build-image.sh with hack/ociimage into work and moves the image archive into
// out, with an SBOM of each binary in it.
func buildImage(repo, work, out string, c Config) ([]string, error) {
	dir := filepath.Join(work, "image")
	cmd := exec.Command(filepath.Join(repo, "hack", "build-image.sh"), c.Version)
	cmd.Dir = repo
	// hack/ociimage, even where a Docker engine answers: the image is then made only of what go.sum
	// pins and a scratch base, by the toolchain that builds the release's binaries, and its binaries
	// stay here for their SBOMs. The Dockerfile's build stage is a golang image by tag (see there).
	cmd.Env = append(os.Environ(), "OUT="+dir, "IMAGE="+c.Image, "PLATFORMS="+strings.Join(ImagePlatforms, ","), "GOFLAGS=", "IMAGE_BUILDER=ociimage")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err != nil {
		return nil, fmt.Errorf("hack/build-image.sh %s: %v\n%s", c.Version, err, stderr.String())
	}
	name := ImageName(c.Version)
	if err := os.Rename(filepath.Join(dir, name), filepath.Join(out, name)); err != nil {
		return nil, fmt.Errorf("the image archive: %w", err)
	}
	files := []string{name}
	for _, p := range ImagePlatforms {
		for _, b := range []string{"update-operator", "update-agent"} {
			bin := filepath.Join(dir, "bin", strings.ReplaceAll(p, "/", "_"), b)
			sbom, err := SBOM(bin, b, c.Version)
			if err != nil {
				return nil, fmt.Errorf("SBOM of the image's %s %s: %w", b, p, err)
			}
			n := "image_" + SBOMName(b, c.Version, p)
			if err := writeFile(out, n, sbom); err != nil {
				return nil, err
			}
			files = append(files, n)
		}
	}
	return files, nil
}

// imageRef is the image reference kustomize renders (deploy/ pins a release tag).
var imageRef = regexp.MustCompile(`(image: )"?` + regexp.QuoteMeta(DefaultImage) + `:[^\s"]+"?`)

// renderManifest renders the kustomize directory dir as `kubectl kustomize` does, with the image at
// ref (PinnedImage), and refuses a rendering that would still pull the image by anything but ref.
func renderManifest(dir string, c Config, ref string) ([]byte, error) {
	y, err := kustomize(dir)
	if err != nil {
		return nil, err
	}
	n := len(imageRef.FindAll(y, -1))
	if n == 0 {
		return nil, fmt.Errorf("kustomize %s rendered no %s image to set to %s", dir, DefaultImage, ref)
	}
	y = imageRef.ReplaceAll(y, []byte("${1}"+ref))
	if bad := unpinned(y, ref, DefaultImage, c.Image); len(bad) > 0 {
		return nil, fmt.Errorf("kustomize %s: the image is still named without the digest built, as %s", dir, strings.Join(bad, ", "))
	}
	head := fmt.Sprintf("# Slipway %s, rendered from %s/ (kubectl apply -f). It installs paused: no node reboots\n"+
		"# until `kubectl slipway resume` (docs/install.md). It pulls the image by the digest this release\n"+
		"# built: push the release's image with `skopeo copy --all --preserve-digests`.\n", c.Version, filepath.Base(dir))
	return append([]byte(head), y...), nil
}

// kustomize renders dir with kustomize's API (what kubectl embeds).
func kustomize(dir string) ([]byte, error) {
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	return rm.AsYaml()
}

// renderOverlay renders an overlay that names no image (it refuses one that does: that belongs in
// Manifests, pinned).
func renderOverlay(dir string, c Config) ([]byte, error) {
	y, err := kustomize(dir)
	if err != nil {
		return nil, err
	}
	if imageRef.Match(y) {
		return nil, fmt.Errorf("kustomize %s renders an image: it belongs with the pinned manifests", dir)
	}
	head := fmt.Sprintf("# Slipway %s, rendered from %s/ (kubectl apply -f; kubectl delete -f rolls it back). See\n"+
		"# docs/migrate.md, Migrating from FLUO, path A.\n", c.Version, filepath.Base(dir))
	return append([]byte(head), y...), nil
}

// Sums is sha256sum's output for files in dir.
func Sums(dir string, files []string) ([]byte, error) {
	var b bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), f)
	}
	return b.Bytes(), nil
}

type tarEntry struct {
	name string
	mode int64
	data []byte
}

// tarGz is a reproducible .tar.gz of entries (no times, owners or names in the headers).
func tarGz(entries []tarEntry) []byte {
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		_ = tw.WriteHeader(&tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX})
		_, _ = tw.Write(e.data)
	}
	_ = tw.Close()
	_ = gz.Close()
	return b.Bytes()
}

func writeFile(dir, name string, data []byte) error {
	return os.WriteFile(filepath.Join(dir, name), data, 0o644)
}
