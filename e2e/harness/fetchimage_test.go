package harness

import (
	"crypto/sha512"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// hack/fetch-flatcar-image.sh (make flatcar-image) against a local release server: the image is
// kept only when its SHA-512 matches the release's DIGESTS; an unreachable server says what to do.
func TestFetchFlatcarImage(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl missing (apt-get install curl)")
	}
	img := []byte("not really a qcow2, but bytes with a known hash")
	sum := sha512.Sum512(img)
	digest := hex.EncodeToString(sum[:])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/4593.2.5/version.txt", "/current/version.txt":
			_, _ = w.Write([]byte("FLATCAR_BUILD=4593\nFLATCAR_VERSION=4593.2.5\n"))
		case "/4593.2.5/flatcar_production_qemu_image.img", "/current/flatcar_production_qemu_image.img":
			_, _ = w.Write(img)
		case "/current/flatcar_production_qemu_image.img.DIGESTS":
			_, _ = w.Write([]byte("# MD5 HASH\n0123  flatcar_production_qemu_image.img\n# SHA512 HASH\n" + digest + "  flatcar_production_qemu_image.img\n"))
		case "/4593.2.5/flatcar_production_qemu_image.img.DIGESTS":
			_, _ = w.Write([]byte("# SHA512 HASH\n" + strings.Repeat("0", 128) + "  flatcar_production_qemu_image.img\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	run := func(base, version string) (string, string, error) {
		cache := t.TempDir()
		cmd := exec.Command(filepath.Join(root, "hack", "fetch-flatcar-image.sh"))
		cmd.Env = append(os.Environ(), "FLATCAR_RELEASE_BASE="+base, "FLATCAR_VERSION="+version, "SLIPWAY_CACHE="+cache)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), stderr.String() + "\n" + cache, err
	}

	out, _, err := run(srv.URL, "current")
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if got, _ := os.ReadFile(out); string(got) != string(img) || !strings.Contains(out, "stable-4593.2.5") {
		t.Fatalf("image at %q", out)
	}

	_, stderr, err := run(srv.URL, "4593.2.5") // DIGESTS disagree
	cache := stderr[strings.LastIndex(stderr, "\n")+1:]
	if err == nil || !strings.Contains(stderr, "SHA-512 mismatch") {
		t.Fatalf("bad digest accepted: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(cache, "flatcar")); err == nil {
		t.Fatal("an unverified image was kept")
	}

	if _, stderr, err := run("http://127.0.0.1:1", "current"); err == nil || !strings.Contains(stderr, "FLATCAR_IMAGE") {
		t.Fatalf("offline: %v\n%s", err, stderr)
	}
	if _, stderr, err := run(srv.URL, "latest; rm -rf /"); err == nil || !strings.Contains(stderr, "FLATCAR_VERSION") {
		t.Fatalf("bad version accepted: %v\n%s", err, stderr)
	}
}
