package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
)

// imageLine is every image a manifest pulls.
var imageLine = regexp.MustCompile(`(?m)^[ \t]*(?:- )?image: *"?([^\s"]*)"?[ \t]*$`)

// imageViolations are the ways manifest pulls anything but ref (repo:tag@sha256:…): an image: of
// another value, or the image's repository named anywhere without ref's tag and digest.
func imageViolations(manifest, ref string) []string {
	var bad []string
	images := imageLine.FindAllStringSubmatch(manifest, -1)
	if len(images) == 0 {
		bad = append(bad, "no image: at all")
	}
	for _, m := range images {
		if m[1] != ref {
			bad = append(bad, "image: "+m[1])
		}
	}
	repo, _, _ := strings.Cut(ref, "@")
	repo = repo[:strings.LastIndex(repo, ":")]
	for i := 0; ; {
		j := strings.Index(manifest[i:], repo)
		if j < 0 {
			break
		}
		i += j
		if !strings.HasPrefix(manifest[i:], ref) {
			end := strings.IndexAny(manifest[i:], " \t\r\n\"'],")
			if end < 0 {
				end = len(manifest) - i
			}
			bad = append(bad, "mention: "+manifest[i:i+end])
		}
		i += len(repo)
	}
	return bad
}

// checkPinned fails unless manifest pulls ref and nothing else.
func checkPinned(t *testing.T, name, manifest, ref string) {
	t.Helper()
	if !regexp.MustCompile(`@sha256:[a-f0-9]{64}$`).MatchString(ref) {
		t.Fatalf("%s: %q is no digest reference", name, ref)
	}
	if bad := imageViolations(manifest, ref); len(bad) > 0 {
		t.Errorf("%s pulls the image without the digest built (want %s): %v", name, ref, bad)
	}
}

// renderChart renders the packaged chart at path as `helm install --dry-run=client` does.
func renderChart(t *testing.T, path string) string {
	t.Helper()
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace, install.Replace = "slipway", "slipway-system", true
	install.KubeVersion = must(common.ParseKubeVersion("v1.35.4"))
	r, err := install.Run(ch, nil)
	if err != nil {
		t.Fatalf("the packaged chart does not render: %v", err)
	}
	return r.(*release.Release).Manifest
}

// Every manifest and the chart the release writes pull repo:tag@digest, from deploy/ and
// deploy/helm/slipway as they are in this checkout, with the default and with another -image (the
// whole release, TestRelease, checks the same with the digest of the image it built).
func TestManifestsPinTheDigest(t *testing.T) {
	sum := sha256.Sum256([]byte("an image index"))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	for _, image := range []string{DefaultImage, "registry.example:5000/mirror/slipway"} {
		c := Config{Version: "v1.2.3-rc.1", Image: image}
		ref := PinnedImage(image, c.Version, digest)
		for _, m := range Manifests {
			y, err := renderManifest(filepath.Join("../..", m.Dir), c, ref)
			if err != nil {
				t.Fatal(err)
			}
			checkPinned(t, m.File, string(y), ref)
		}
		out := t.TempDir()
		name, err := PackageChart("../../deploy/helm/slipway", out, c, digest)
		if err != nil {
			t.Fatal(err)
		}
		checkPinned(t, "the chart", renderChart(t, filepath.Join(out, name)), ref)
		ch := must(loader.Load(filepath.Join(out, name)))
		for _, f := range ch.Raw {
			if f.Name == "values.yaml" && !strings.Contains(string(f.Data), "\n  digest: "+digest+"\n") {
				t.Errorf("the chart's values.yaml does not pin the digest:\n%s", f.Data)
			}
		}
	}
	if _, err := PackageChart("../../deploy/helm/slipway", t.TempDir(), Config{Version: "v1.2.3", Image: DefaultImage}, ""); err == nil {
		t.Error("a chart without a digest was packaged")
	}

	// The check can fail: by tag alone, quoted or not, by a moved tag, or named elsewhere.
	ref := PinnedImage(DefaultImage, "v1.2.3", digest)
	for _, y := range []string{
		"image: " + DefaultImage + ":v1.2.3\n",
		`      image: "` + DefaultImage + `:v1.2.3"` + "\n",
		"image: " + DefaultImage + ":v1.2.4@" + digest + "\n",
		"image: " + ref + "\nargs: [--hook-image=" + DefaultImage + ":v1.2.3]\n",
		"kind: ConfigMap\n",
	} {
		if len(imageViolations(y, ref)) == 0 {
			t.Errorf("passed as pinned: %q", y)
		}
		if y != "kind: ConfigMap\n" && len(unpinned([]byte(y), ref, DefaultImage)) == 0 {
			t.Errorf("renderManifest's own check passed %q", y)
		}
	}
}

// ociArchive writes an OCI layout archive: index.json naming one descriptor, and the blobs.
func ociArchive(t *testing.T, index string, blobs map[string][]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "image.oci.tar")
	f := must(os.Create(path))
	tw := tar.NewWriter(f)
	add := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		must(tw.Write(data))
	}
	add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	add("index.json", []byte(index))
	for name, data := range blobs {
		add(name, data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// ImageDigest reads the digest of the one image the archive holds, and only a digest its blob has.
func TestImageDigest(t *testing.T) {
	blob := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`)
	sum := sha256.Sum256(blob)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	path := "blobs/sha256/" + hex.EncodeToString(sum[:])
	desc := func(digest string, size int) string {
		return fmt.Sprintf(`{"mediaType":"application/vnd.oci.image.index.v1+json","digest":%q,"size":%d}`, digest, size)
	}
	index := func(descs ...string) string {
		return `{"schemaVersion":2,"manifests":[` + strings.Join(descs, ",") + `]}`
	}
	if got, err := ImageDigest(ociArchive(t, index(desc(digest, len(blob))), map[string][]byte{path: blob})); err != nil || got != digest {
		t.Errorf("ImageDigest = %q, %v; want %s", got, err, digest)
	}
	// buildx writes ./-prefixed names.
	if got, err := ImageDigest(ociArchive(t, index(desc(digest, len(blob))), map[string][]byte{"./" + path: blob})); err != nil || got != digest {
		t.Errorf("./ names: ImageDigest = %q, %v", got, err)
	}
	other := sha256.Sum256([]byte("other"))
	for _, c := range []struct {
		name, index string
		blobs       map[string][]byte
		want        string
	}{
		{"a blob that is not its digest", index(desc(digest, len(blob))), map[string][]byte{path: []byte("tampered")}, "the blob of"},
		{"a size that is not the blob's", index(desc(digest, 7)), map[string][]byte{path: blob}, "index.json says 7"},
		{"no blob", index(desc(digest, len(blob))), nil, "does not hold"},
		{"two images", index(desc(digest, len(blob)), desc("sha256:"+hex.EncodeToString(other[:]), 5)), map[string][]byte{path: blob}, "names 2 images"},
		{"no image", index(), nil, "names 0 images"},
		{"not sha256", index(desc("sha512:abc", 3)), nil, "not sha256"},
		{"not an image", `{"manifests":[{"mediaType":"text/plain","digest":"` + digest + `","size":1}]}`, map[string][]byte{path: blob}, "no image index or manifest"},
	} {
		if got, err := ImageDigest(ociArchive(t, c.index, c.blobs)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q, %v; want an error with %q", c.name, got, err, c.want)
		}
	}
}

// indexDigest is the test's own reading of an OCI layout archive's image digest (index.json's one
// descriptor, hashed from its blob), for TestRelease to hold the manifests against.
func indexDigest(t *testing.T, files map[string][]byte) string {
	t.Helper()
	var idx struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index.json: %v %+v", err, idx)
	}
	d := idx.Manifests[0].Digest
	sum := sha256.Sum256(files["blobs/"+strings.Replace(d, ":", "/", 1)])
	if "sha256:"+hex.EncodeToString(sum[:]) != d {
		t.Fatalf("index.json names %s, not its blob's digest", d)
	}
	return d
}
