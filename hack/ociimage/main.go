// Command ociimage builds single-layer container images from local files, without Docker or a
// registry.
//
// One image, as a tarball for `ctr images import` (the e2e nodes' Slipway, pause and hook images):
//
//	ociimage -name slipway:e2e -out slipway.tar -entrypoint /update-operator /update-agent=bin/update-agent ...
//
// With -platforms, one image per platform under an OCI image index, written as an OCI image layout
// (-layout DIR) and, with -out, the same layout as a tar (an "OCI archive", what `docker buildx
// --output type=oci` writes). {os} and {arch} in a local path name that platform's file. This is
// `make image` without Docker (hack/image.sh):
//
//	ociimage -name ghcr.io/slipway-dev/slipway:v0.3.0 -platforms linux/amd64,linux/arm64 -layout DIR \
//	  -out slipway.oci.tar -link /bin/update-agent=../update-agent /update-agent=bin/{os}_{arch}/update-agent
//
// -link adds a symbolic link: scratch images have no ln, but a layer can hold a link.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is every entry's modification time, so the same inputs give the same digests.
var epoch = time.Unix(0, 0)

type spec struct {
	ref, entry, user string
	files, links     []string
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var s spec
	var links listFlag
	out := flag.String("out", "", "tarball to write: an image for ctr import, or with -platforms the OCI layout as a tar")
	dir := flag.String("layout", "", "with -platforms: directory to write the OCI image layout to")
	platforms := flag.String("platforms", "", "comma-separated os/arch[/variant], e.g. linux/amd64,linux/arm64: build an image index")
	flag.StringVar(&s.ref, "name", "", "image reference, e.g. docker.io/library/slipway:e2e")
	flag.StringVar(&s.entry, "entrypoint", "", "entrypoint (a path inside the image)")
	flag.StringVar(&s.user, "user", "", "user the image runs as, e.g. 65532:65532; empty: root")
	flag.Var(&links, "link", "/path/in/image=target: a symbolic link (repeatable)")
	flag.Parse()
	s.files, s.links = flag.Args(), links
	if s.ref == "" || len(s.files) == 0 || (*platforms == "" && *out == "") || (*platforms != "" && *dir == "" && *out == "") {
		fmt.Fprintln(os.Stderr, "usage: ociimage -name REF -out FILE [-entrypoint PATH] [-user U] [-link /path=target]... /path/in/image=local/file ...\n"+
			"       ociimage -name REF -platforms os/arch,... [-layout DIR] [-out FILE] [...] /path/in/image=local/{os}_{arch}/file ...")
		os.Exit(2)
	}
	var err error
	if *platforms == "" {
		err = writeImage(s, *out)
	} else {
		err = writeIndex(s, strings.Split(*platforms, ","), *dir, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

// writeImage writes one linux/amd64 image (Docker media types, as ctr import has always taken them).
func writeImage(s spec, out string) error {
	img, err := image(s, v1.Platform{OS: "linux", Architecture: "amd64"}, false)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(s.ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, tag, img)
}

// writeIndex writes an OCI image index holding one image per platform, as a layout in dir (a
// temporary one when only out is wanted) and as a tar of that layout in out.
func writeIndex(s spec, platforms []string, dir, out string) error {
	tag, err := name.NewTag(s.ref)
	if err != nil {
		return err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		plat, err := v1.ParsePlatform(strings.TrimSpace(p))
		if err != nil {
			return err
		}
		img, err := image(s, *plat, true)
		if err != nil {
			return fmt.Errorf("%s: %w", plat, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "ociimage-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := clearLayout(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	// The names buildx's OCI output and containerd's import use.
	err = lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          tag.Name(),
		"org.opencontainers.image.ref.name": tag.TagStr(),
	}))
	if err != nil || out == "" {
		return err
	}
	return tarDir(dir, out)
}

// clearLayout removes dir if it is an earlier OCI layout, so no stale blob stays; anything else that
// is not empty is refused.
func clearLayout(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(entries) == 0) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("-layout %s is neither empty nor an OCI layout; not replacing it", dir)
	}
	return os.RemoveAll(dir)
}

// image is s's single layer for one platform with its config.
func image(s spec, plat v1.Platform, oci bool) (v1.Image, error) {
	data, err := layerTar(s, plat)
	if err != nil {
		return nil, err
	}
	var opts []tarball.LayerOption
	if oci {
		opts = append(opts, tarball.WithMediaType(types.OCILayer))
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, opts...)
	if err != nil {
		return nil, err
	}
	base := empty.Image
	if oci {
		base = mutate.ConfigMediaType(mutate.MediaType(base, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = plat.OS, plat.Architecture, plat.Variant
	if s.entry != "" {
		cfg.Config.Entrypoint = []string{s.entry}
	}
	cfg.Config.User = s.user
	return mutate.ConfigFile(img, cfg)
}

// layerTar is the layer's uncompressed tar: the files (local paths with {os} and {arch} replaced by
// plat's), their parent directories, and the links.
func layerTar(s spec, plat v1.Platform) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	header := func(h *tar.Header) error {
		// Parent directories first, once each, as a runtime extracting the layer expects.
		var parents []string
		for d := path.Dir(h.Name); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
			dirs[d] = true
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: epoch}); err != nil {
				return err
			}
		}
		h.ModTime = epoch
		return tw.WriteHeader(h)
	}
	r := strings.NewReplacer("{os}", plat.OS, "{arch}", plat.Architecture)
	for _, f := range s.files {
		dst, src, ok := strings.Cut(f, "=")
		if !ok || !path.IsAbs(dst) {
			return nil, fmt.Errorf("%q: want /path/in/image=local/file", f)
		}
		b, err := os.ReadFile(r.Replace(src))
		if err != nil {
			return nil, err
		}
		if err := header(&tar.Header{Name: strings.TrimPrefix(path.Clean(dst), "/"), Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	for _, l := range s.links {
		dst, target, ok := strings.Cut(l, "=")
		if !ok || !path.IsAbs(dst) || target == "" {
			return nil, fmt.Errorf("-link %q: want /path/in/image=target", l)
		}
		if err := header(&tar.Header{Name: strings.TrimPrefix(path.Clean(dst), "/"), Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: target}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the files under dir to out as a tar with paths relative to dir.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Name: rel + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: epoch})
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg, ModTime: epoch}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
