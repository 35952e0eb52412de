package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// `make image` without Docker (hack/build-image.sh, IMAGE_BUILDER=ociimage) cross-compiles both
// binaries for amd64 and arm64 and writes one OCI image index; read back from the archive it wrote,
// each platform's image holds both binaries for its own architecture, static, at / and under /bin.
func TestBuildImage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs go build of both binaries for two architectures (~1 min)")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to cross-compile with")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "hack/build-image.sh", "v9.8.7-test")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "IMAGE_BUILDER=ociimage", "OUT="+out, "IMAGE=ghcr.io/slipway-dev/slipway")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/build-image.sh: %v\n%s", err, stderr.Bytes())
	}
	archive := strings.TrimSpace(string(stdout))
	if archive != filepath.Join(out, "slipway-v9.8.7-test.oci.tar") {
		t.Fatalf("printed %q", archive)
	}

	// The archive is what gets shipped: unpack it and read it as an OCI layout.
	dir := t.TempDir()
	untar(t, archive, dir)
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 {
		t.Fatalf("index.json has %d entries, want the one image index", len(topManifest.Manifests))
	}
	d := topManifest.Manifests[0]
	if d.MediaType != types.OCIImageIndex ||
		d.Annotations["io.containerd.image.name"] != "ghcr.io/slipway-dev/slipway:v9.8.7-test" ||
		d.Annotations["org.opencontainers.image.ref.name"] != "v9.8.7-test" {
		t.Errorf("index.json entry: %+v", d)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	if len(im.Manifests) != len(want) {
		t.Fatalf("image index has %d manifests, want %d", len(im.Manifests), len(want))
	}
	for _, m := range im.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" || want[m.Platform.Architecture] == 0 {
			t.Errorf("manifest %s: platform %v", m.Digest, m.Platform)
			continue
		}
		arch := m.Platform.Architecture
		t.Run(arch, func(t *testing.T) {
			if m.MediaType != types.OCIManifestSchema1 {
				t.Errorf("media type %s", m.MediaType)
			}
			img, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.OS != "linux" || cfg.Architecture != arch || cfg.Config.User != "65532:65532" ||
				strings.Join(cfg.Config.Entrypoint, " ") != "/update-operator" {
				t.Errorf("config: os %s arch %s user %q entrypoint %v", cfg.OS, cfg.Architecture, cfg.Config.User, cfg.Config.Entrypoint)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("%d layers, %v", len(layers), err)
			}
			if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
				t.Errorf("layer media type %s", mt)
			}
			files := layerFiles(t, layers[0])
			for _, bin := range []string{"update-operator", "update-agent"} {
				for _, p := range []string{"/" + bin, "/bin/" + bin} {
					b, ok := resolve(files, p)
					if !ok {
						t.Errorf("%s: not in the layer", p)
						continue
					}
					f, err := elf.NewFile(bytes.NewReader(b))
					if err != nil {
						t.Errorf("%s: %v", p, err)
						continue
					}
					if f.Machine != want[arch] || f.Class != elf.ELFCLASS64 {
						t.Errorf("%s: ELF machine %s, want %s", p, f.Machine, want[arch])
					}
					for _, prog := range f.Progs {
						if prog.Type == elf.PT_INTERP {
							t.Errorf("%s: dynamically linked (has an interpreter)", p)
						}
					}
				}
			}
			if h := files["bin/update-agent"]; h.hdr == nil || h.hdr.Typeflag != tar.TypeSymlink {
				t.Errorf("/bin/update-agent is not a symbolic link")
			}
		})
	}

	t.Run("refuses to replace a directory that is not a layout", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "keep"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		err := writeIndex(spec{ref: "x/y:z", files: []string{"/a=" + archive}}, []string{"linux/amd64"}, dir, "")
		if err == nil {
			t.Error("replaced a directory that is not an OCI layout")
		}
		if _, serr := os.Stat(filepath.Join(dir, "keep")); serr != nil {
			t.Errorf("its file is gone: %v", serr)
		}
	})
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

// layerFiles reads a layer's entries by path (without the leading slash).
func layerFiles(t *testing.T, l v1.Layer) map[string]entry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(path.Clean(h.Name), "/")] = entry{h, b}
	}
}

// resolve follows symbolic links inside the layer, as a container runtime would from its root.
func resolve(files map[string]entry, p string) ([]byte, bool) {
	for i := 0; i < 10; i++ {
		e, ok := files[strings.TrimPrefix(path.Clean(p), "/")]
		if !ok {
			return nil, false
		}
		switch e.hdr.Typeflag {
		case tar.TypeReg:
			return e.data, e.hdr.Mode&0o111 != 0
		case tar.TypeSymlink:
			if path.IsAbs(e.hdr.Linkname) {
				p = e.hdr.Linkname
			} else {
				p = path.Join("/", path.Dir(p), e.hdr.Linkname)
			}
		default:
			return nil, false
		}
	}
	return nil, false
}

func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir) {
			t.Fatalf("entry %q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o644)
			}
		default:
			t.Fatalf("entry %q of type %c in an OCI archive", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
