// Command ociimage builds a single-layer image tarball from local files, without Docker or a
// registry, for `ctr images import` on the e2e nodes: the Slipway image (the same two static binaries
// the Dockerfile ships) and the pause image.
//
//	ociimage -name slipway:e2e -out slipway.tar -entrypoint /update-operator /update-agent=bin/update-agent ...
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	ref := flag.String("name", "", "image reference, e.g. docker.io/library/slipway:e2e")
	out := flag.String("out", "", "tarball to write")
	entry := flag.String("entrypoint", "", "entrypoint (a path inside the image)")
	flag.Parse()
	if *ref == "" || *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: ociimage -name REF -out FILE [-entrypoint PATH] /path/in/image=local/file ...")
		os.Exit(2)
	}
	if err := build(*ref, *out, *entry, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func build(ref, out, entry string, files []string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		dst, src, ok := strings.Cut(f, "=")
		if !ok {
			return fmt.Errorf("%q: want /path/in/image=local/file", f)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(dst, "/"), Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	if entry != "" {
		cfg.Config.Entrypoint = []string{entry}
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, tag, img)
}
