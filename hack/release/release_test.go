package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	"sigs.k8s.io/krew/pkg/constants"
	"sigs.k8s.io/krew/pkg/index"
	"sigs.k8s.io/yaml"
)

func TestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "-version is required"},
		{[]string{"-version", "0.4.0"}, exitUsage, `-version "0.4.0": want vMAJOR.MINOR.PATCH`},
		{[]string{"-version", "v0.4"}, exitUsage, "want vMAJOR"},
		{[]string{"-version", "v0.4.0+build"}, exitUsage, "want vMAJOR"},
		{[]string{"-version", "v01.4.0"}, exitUsage, "want vMAJOR"},
		{[]string{"-version", "v0.4.0", "-image", "ghcr.io/x/y:v1"}, exitUsage, "want an image repository without tag"},
		{[]string{"-version", "v0.4.0", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"-bogus"}, exitUsage, "flag provided but not defined: -bogus"},
		// A good version in a directory that is no repository: refused before anything is written.
		{[]string{"-version", "v0.4.0-rc.1", "-repo", "/nonexistent", "-out", filepath.Join(t.TempDir(), "dist")}, exitError, "is not a Slipway repository"},
		{[]string{"-version", "v0.4.0", "-allow-dirty", "-repo", "/nonexistent"}, exitError, "is not a Slipway repository"},
	} {
		var stderr bytes.Buffer
		if code := run(c.args, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", c.args, code, c.code, c.want, stderr.String())
		}
	}
}

// An -out directory that holds anything but an earlier release is refused and left as it was.
func TestOutIsNeverSomeonesDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("notes.txt", "mine")
	if err := prepareOut(dir); err == nil || !strings.Contains(err.Error(), "holds no earlier release") {
		t.Errorf("a directory without SHA256SUMS: %v", err)
	}
	write(SumsFile, "0000  install.yaml\n")
	write("install.yaml", "old")
	if err := prepareOut(dir); err == nil || !strings.Contains(err.Error(), "holds notes.txt") {
		t.Errorf("an earlier release plus a file of someone's: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatalf("refused, yet notes.txt is gone: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := prepareOut(dir); err != nil {
		t.Fatalf("an earlier release: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the earlier release was not replaced: %v", entries)
	}
}

// The SBOM lists what the binary really links: this test binary links cyclonedx-go and helm.
func TestSBOMOfThisBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := SBOM(self, "release.test", "v9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	bom := decodeBOM(t, data)
	if c := bom.Metadata.Component; c.Name != "release.test" || c.Version != "v9.9.9" || c.PackageURL != "pkg:golang/github.com/slipway-dev/slipway/hack/release@v9.9.9" {
		t.Errorf("main component %+v", c)
	}
	has := components(bom)
	for _, m := range []string{"github.com/CycloneDX/cyclonedx-go@v0.12.0", "helm.sh/helm/v4@v4.3.1", "stdlib@go1"} {
		if !slices.ContainsFunc(has, func(c string) bool { return strings.HasPrefix(c, m) }) {
			t.Errorf("SBOM without %s: %v", m, has)
		}
	}
	// client-go is required as v11.0.0+incompatible by krew and replaced: the SBOM names what is linked.
	if slices.ContainsFunc(has, func(c string) bool { return strings.Contains(c, "v11.0.0") }) {
		t.Errorf("SBOM names a module version that is not linked: %v", has)
	}
	if _, err := SBOM(filepath.Join(t.TempDir(), "missing"), "x", "v1.0.0"); err == nil {
		t.Error("SBOM of a missing file: no error")
	}
}

// The krew manifest passes krew's own rules and names each archive by its real SHA-256.
func TestKrewManifest(t *testing.T) {
	out := t.TempDir()
	c := Config{Version: "v1.2.3", Download: DefaultDownload}
	for _, pl := range Binaries[0].Platforms {
		data := tarGz([]tarEntry{{"kubectl-slipway", 0o755, []byte("binary for " + pl)}, {"LICENSE", 0o644, []byte("Apache")}})
		if err := writeFile(out, ArchiveName("kubectl-slipway", c.Version, pl), data); err != nil {
			t.Fatal(err)
		}
	}
	y, err := KrewManifest(c, out)
	if err != nil {
		t.Fatal(err)
	}
	p := checkKrew(t, y, out, c.Version)
	if len(p.Spec.Platforms) != 4 || p.Spec.Platforms[0].URI != DefaultDownload+"/v1.2.3/kubectl-slipway_v1.2.3_linux_amd64.tar.gz" {
		t.Errorf("platforms: %+v", p.Spec.Platforms)
	}
	// The rules can fail: a wrong sum, a platform without selector.
	p.Spec.Platforms[1].Sha256 = strings.Repeat("0", 64)
	if err := krewRules(p, out); err == nil {
		t.Error("a wrong sha256 passed")
	}
	p.Spec.Platforms[1].Selector = nil
	if err := krewRules(p, out); err == nil {
		t.Error("a platform without selector passed")
	}
}

// checkKrew parses a krew manifest and applies krewRules.
func checkKrew(t *testing.T, y []byte, dir, version string) index.Plugin {
	t.Helper()
	var p index.Plugin
	if err := yaml.UnmarshalStrict(y, &p); err != nil {
		t.Fatalf("krew manifest: %v\n%s", err, y)
	}
	if err := krewRules(p, dir); err != nil {
		t.Errorf("krew manifest: %v\n%s", err, y)
	}
	if p.Spec.Version != version {
		t.Errorf("krew manifest version %q, want %q", p.Spec.Version, version)
	}
	return p
}

var krewSHA = regexp.MustCompile(`^[a-f0-9]{64}$`)

// krewRules are the checks of krew v0.4.3's ValidatePlugin (internal/index/validation, which its
// module does not export), and the archives' real sums and contents.
func krewRules(p index.Plugin, dir string) error {
	switch {
	case p.APIVersion != constants.CurrentAPIVersion || p.Kind != constants.PluginKind:
		return fmt.Errorf("apiVersion %q kind %q", p.APIVersion, p.Kind)
	case !regexp.MustCompile(`^[\w-]+$`).MatchString(p.Name) || p.Name != KrewPlugin:
		return fmt.Errorf("name %q", p.Name)
	case p.Spec.ShortDescription == "" || strings.ContainsAny(p.Spec.ShortDescription, "\r\n"):
		return fmt.Errorf("shortDescription %q", p.Spec.ShortDescription)
	case len(p.Spec.Platforms) == 0:
		return errors.New("no platform")
	case !semver.MatchString(p.Spec.Version):
		return fmt.Errorf("version %q", p.Spec.Version)
	}
	for _, pl := range p.Spec.Platforms {
		if pl.URI == "" || !krewSHA.MatchString(pl.Sha256) || pl.Bin == "" || len(pl.Files) == 0 {
			return fmt.Errorf("platform %+v", pl)
		}
		if pl.Selector == nil || len(pl.Selector.MatchLabels) == 0 {
			return fmt.Errorf("platform %s: no selector", pl.URI)
		}
		for k := range pl.Selector.MatchLabels {
			if k != "os" && k != "arch" {
				return fmt.Errorf("selector key %q", k)
			}
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.Base(pl.URI)))
		if err != nil {
			return err
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != pl.Sha256 {
			return fmt.Errorf("%s: sha256 %s is not the archive's", pl.URI, pl.Sha256)
		}
		files := untarGz(data)
		for _, f := range pl.Files {
			if _, ok := files[f.From]; !ok || f.To == "" {
				return fmt.Errorf("%s: files %+v, archive holds %v", pl.URI, f, keys(files))
			}
		}
		if _, ok := files[pl.Bin]; !ok {
			return fmt.Errorf("%s: no bin %s", pl.URI, pl.Bin)
		}
	}
	return nil
}

// TestRelease runs the whole release and checks every artifact. It builds this checkout as it is
// (-allow-dirty: a checkout being worked on is rarely clean), so the version carries DirtySuffix when
// the tree has changes; TestRefusesDirtyTree has the refusal without -allow-dirty.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries for six platforms and the image: not in the fast tier")
	}
	version := "v0.0.0-ci.1"
	if paths, err := DirtyPaths("../.."); err != nil || len(paths) > 0 {
		version += DirtySuffix
		t.Logf("the checkout is not its commit (%d changed paths, %v): expecting %s", len(paths), err, version)
	}
	out := filepath.Join(t.TempDir(), "dist")
	var log bytes.Buffer
	if code := run([]string{"-version", "v0.0.0-ci.1", "-allow-dirty", "-repo", "../..", "-out", out}, &log); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, log.String())
	}
	t.Logf("release log:\n%s", log.String())
	for _, step := range []string{"built darwin/arm64", "building the image", "pinning " + DefaultImage + ":" + version + "@sha256:", "elapsed="} {
		if !strings.Contains(log.String(), step) {
			t.Errorf("progress without %q", step)
		}
	}

	// Every file is listed in SHA256SUMS with its real sum, and nothing else is there.
	sums, err := os.ReadFile(filepath.Join(out, SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, _ := strings.Cut(l, "  ")
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if s := sha256.Sum256(data); hex.EncodeToString(s[:]) != sum {
			t.Errorf("%s: SHA256SUMS says %s", name, sum)
		}
		listed[name] = true
	}
	want := []string{ImageName(version), "install.yaml", "install-fleetlock.yaml", "node-prep.yaml", "fluo-migration.yaml", ChartName(version), KrewFile}
	want = append(want, Snippets...)
	for _, b := range Binaries {
		for _, p := range b.Platforms {
			want = append(want, ArchiveName(b.Name, version, p), SBOMName(b.Name, version, p))
		}
	}
	for _, p := range ImagePlatforms {
		want = append(want, "image_"+SBOMName("update-operator", version, p), "image_"+SBOMName("update-agent", version, p))
	}
	entries, _ := os.ReadDir(out)
	var got []string
	for _, e := range entries {
		if e.Name() != SumsFile {
			got = append(got, e.Name())
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) || len(listed) != len(want) {
		t.Errorf("files\n got %v\nwant %v\nlisted %v", got, want, keys(listed))
	}

	// Binaries: each archive holds the binary for its platform, stamped with the version, and LICENSE;
	// its SBOM names the version and what it links.
	for _, b := range Binaries {
		for _, p := range b.Platforms {
			data, _ := os.ReadFile(filepath.Join(out, ArchiveName(b.Name, version, p)))
			files := untarGz(data)
			if _, ok := files["LICENSE"]; !ok {
				t.Errorf("%s %s: no LICENSE", b.Name, p)
			}
			bin := filepath.Join(t.TempDir(), b.Name)
			if err := os.WriteFile(bin, files[b.Name], 0o755); err != nil {
				t.Fatal(err)
			}
			checkBinary(t, bin, p, version)
			bom := decodeBOM(t, must(os.ReadFile(filepath.Join(out, SBOMName(b.Name, version, p)))))
			dep := map[string]string{"kubectl-slipway": "k8s.io/client-go@", "update-agent": "github.com/godbus/dbus/v5@"}[b.Name]
			if bom.Metadata.Component.Version != version || !slices.ContainsFunc(components(bom), func(c string) bool { return strings.HasPrefix(c, dep) }) {
				t.Errorf("%s %s SBOM: %+v, without %s", b.Name, p, bom.Metadata.Component, dep)
			}
		}
	}

	// The image index holds both platforms.
	archive := ociFiles(t, filepath.Join(out, ImageName(version)))
	if got := imagePlatforms(t, archive); !slices.Equal(got, ImagePlatforms) {
		t.Errorf("image index platforms %v, want %v", got, ImagePlatforms)
	}

	// The manifests pull the release's image, by the digest of the image index in its archive, and
	// nothing else.
	pinned := DefaultImage + ":" + version + "@" + indexDigest(t, archive)
	for _, m := range Manifests {
		y := string(must(os.ReadFile(filepath.Join(out, m.File))))
		if images := imageLine.FindAllString(y, -1); len(images) < 2 {
			t.Errorf("%s: images %v", m.File, images)
		}
		checkPinned(t, m.File, y, pinned)
	}

	// The FLUO migration's overlay is in the bundle, rendered: RBAC and policies, no workload.
	for _, m := range Overlays {
		y := string(must(os.ReadFile(filepath.Join(out, m.File))))
		if !strings.Contains(y, "kind: ClusterRoleBinding") || strings.Contains(y, "kind: Deployment") || strings.Contains(y, "kind: DaemonSet") {
			t.Errorf("%s: want the overlay's bindings and no workload:\n%.400s", m.File, y)
		}
	}

	// The chart loads, has the release's version, and renders with the release's image: the same
	// objects as install.yaml.
	ch, err := loader.Load(filepath.Join(out, ChartName(version)))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != strings.TrimPrefix(version, "v") || ch.Metadata.AppVersion != version {
		t.Errorf("chart version %q appVersion %q", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace, install.Replace = "slipway", "slipway-system", true
	install.KubeVersion = must(common.ParseKubeVersion("v1.35.4"))
	r, err := install.Run(ch, nil)
	if err != nil {
		t.Fatalf("the packaged chart does not render: %v", err)
	}
	manifest := r.(*release.Release).Manifest
	checkPinned(t, "the chart", manifest, pinned)
	if a, b := kinds(manifest), kinds(string(must(os.ReadFile(filepath.Join(out, "install.yaml"))))); !slices.Equal(a, b) {
		t.Errorf("chart objects %v\ninstall.yaml objects %v", a, b)
	}
	if !strings.Contains(string(must(os.ReadFile(filepath.Join(out, "install.yaml")))), "--start-paused") {
		t.Error("install.yaml does not install paused")
	}
	checkKrew(t, must(os.ReadFile(filepath.Join(out, KrewFile))), out, version)

	// Every command the README and docs/ show, run as written against this release on real API
	// servers with the real kubectl, helm and the bundle's kubectl-slipway (deploy/docsguard, in the
	// product's module, where the control planes are).
	guard := exec.Command("go", "test", "-count=1", "-timeout=30m", "-run", "^TestDocumentedCommands$", "-v", "./deploy/docsguard")
	guard.Dir, guard.Env = "../..", append(os.Environ(), "SLIPWAY_DIST="+out)
	if b, err := guard.CombinedOutput(); err != nil || !bytes.Contains(b, []byte("--- PASS: TestDocumentedCommands")) {
		t.Errorf("the documented commands against this release (deploy/docsguard): %v\n%s", err, b)
	} else {
		t.Logf("the documented commands against this release:\n%s", b)
	}

	// A second release into the same directory replaces this one: its SHA256SUMS lists every file it
	// wrote, so prepareOut takes all of them for an earlier release's (TestOutIsNeverSomeonesDirectory
	// has the refusals).
	if err := prepareOut(out); err != nil {
		t.Errorf("a second release into the same -out: %v", err)
	} else if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("a second release into the same -out left %d files of the first", len(entries))
	}
}

// checkBinary asserts the binary's build information: platform, static, trimmed, version stamped.
func checkBinary(t *testing.T, path, platform, version string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	s := map[string]string{}
	for _, kv := range bi.Settings {
		s[kv.Key] = kv.Value
	}
	if s["GOOS"]+"/"+s["GOARCH"] != platform || s["CGO_ENABLED"] != "0" || s["-trimpath"] != "true" || len(s["vcs.revision"]) != 40 {
		t.Errorf("%s (%s): build settings %v", path, platform, s)
	}
	// -trimpath leaves -ldflags out of the build information: the version is in the binary's data, and
	// the one that runs here says it.
	if !bytes.Contains(must(os.ReadFile(path)), []byte(version)) {
		t.Errorf("%s (%s): not stamped with %s", path, platform, version)
	}
	if platform == runtime.GOOS+"/"+runtime.GOARCH && filepath.Base(path) == "kubectl-slipway" {
		out, err := exec.Command(path, "version").Output()
		if err != nil || !strings.HasPrefix(string(out), version) {
			t.Errorf("kubectl-slipway version: %q %v", out, err)
		}
	}
}

func decodeBOM(t *testing.T, data []byte) *cdx.BOM {
	t.Helper()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(data), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.Metadata == nil || bom.Metadata.Component == nil || bom.Components == nil {
		t.Fatalf("not a CycloneDX BOM with a main component:\n%s", data)
	}
	return &bom
}

// components are the BOM's components as name@version.
func components(bom *cdx.BOM) []string {
	var out []string
	for _, c := range *bom.Components {
		out = append(out, c.Name+"@"+c.Version)
	}
	return out
}

// ociFiles are the files of an OCI image layout archive by name.
func ociFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(h.Name, "./")] = must(io.ReadAll(tr))
	}
	return files
}

// imagePlatforms are the platforms of the image index an OCI image layout's index.json names.
func imagePlatforms(t *testing.T, files map[string][]byte) []string {
	t.Helper()
	type desc struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Platform  *struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
	}
	var idx struct {
		Manifests []desc `json:"manifests"`
	}
	var platforms []string
	var walk func(data []byte)
	walk = func(data []byte) {
		if err := json.Unmarshal(data, &idx); err != nil {
			t.Fatal(err)
		}
		for _, d := range idx.Manifests {
			if d.Platform != nil {
				platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
			}
			if strings.Contains(d.MediaType, "index") {
				walk(files["blobs/"+strings.Replace(d.Digest, ":", "/", 1)])
			}
		}
	}
	walk(files["index.json"])
	slices.Sort(platforms)
	return platforms
}

// kinds are a manifest's objects as "Kind name", sorted.
func kinds(manifest string) []string {
	var out []string
	for _, doc := range strings.Split(manifest, "\n---") {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if yaml.Unmarshal([]byte(doc), &o) == nil && o.Kind != "" {
			out = append(out, o.Kind+" "+o.Metadata.Name)
		}
	}
	slices.Sort(out)
	return out
}

func untarGz(data []byte) map[string][]byte {
	out := map[string][]byte{}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return out
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			return out
		}
		out[h.Name], _ = io.ReadAll(tr)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
