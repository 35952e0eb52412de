package harness

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v34 "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/vincent-petithory/dataurl"

	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// The per-node Ignition a Flatcar VM boots with, checked with Ignition's own parser (booting it needs a
// Flatcar image, which this machine cannot download: see make flatcar-image).
func TestFlatcarIgnition(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	snippet, err := os.ReadFile(SlipwaySnippet(root))
	if err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	for _, s := range served {
		p := filepath.Join(files, s.name)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("contents of "+s.name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hashed, err := HashServed(files, "http://10.0.2.2:4321/")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := FlatcarIgnition(FlatcarNode{Name: "node-1", Kubeconfig: "apiVersion: v1\nkind: Config\n"}, snippet, hashed)
	if err != nil {
		t.Fatal(err)
	}
	cfg, rpt, err := v34.Parse(raw)
	if err != nil || len(rpt.Entries) > 0 {
		t.Fatalf("Ignition rejects it: %v\n%s", err, rpt)
	}
	// The user-facing snippet is merged, byte for byte.
	if len(cfg.Ignition.Config.Merge) != 1 {
		t.Fatalf("merge = %+v", cfg.Ignition.Config.Merge)
	}
	merged, err := dataurl.DecodeString(*cfg.Ignition.Config.Merge[0].Source)
	if err != nil || string(merged.Data) != string(snippet) {
		t.Fatalf("merged config is not flatcar-slipway.ign: %v", err)
	}
	byPath := map[string]string{}
	hashes := map[string]string{}
	for _, f := range cfg.Storage.Files {
		if f.Contents.Source == nil {
			t.Fatalf("%s has no contents", f.Path)
		}
		byPath[f.Path] = *f.Contents.Source
		if f.Contents.Verification.Hash != nil {
			hashes[f.Path] = *f.Contents.Verification.Hash
		}
	}
	for _, s := range served {
		if want := "http://10.0.2.2:4321/" + s.name; byPath[s.dest] != want {
			t.Errorf("%s from %q, want %q", s.dest, byPath[s.dest], want)
		}
		b, _ := os.ReadFile(filepath.Join(files, s.name))
		sum := sha512.Sum512(b)
		if hashes[s.dest] != "sha512-"+hex.EncodeToString(sum[:]) {
			t.Errorf("%s: verification %q does not match the served file", s.dest, hashes[s.dest])
		}
	}
	host, err := dataurl.DecodeString(byPath["/etc/hostname"])
	if err != nil || string(host.Data) != "node-1\n" {
		t.Errorf("hostname %q %v", host.Data, err)
	}
	enabled := map[string]bool{}
	for _, u := range cfg.Systemd.Units {
		enabled[u.Name] = u.Enabled != nil && *u.Enabled
	}
	for _, u := range []string{"kubelet.service", "containerd.service", "slipway-images.service", "boot-counter.service"} {
		if !enabled[u] {
			t.Errorf("%s not enabled", u)
		}
	}

	// A served file that is missing is an error naming it, not a node that never joins.
	if err := os.Remove(filepath.Join(files, "kubelet")); err != nil {
		t.Fatal(err)
	}
	if _, err := HashServed(files, "http://10.0.2.2:4321/"); err == nil || !strings.Contains(err.Error(), "kubelet") {
		t.Fatalf("missing kubelet: %v", err)
	}
}

func TestFlatcarImageMissingSaysWhatToDo(t *testing.T) {
	_, err := Up(context.Background(), Config{Dir: t.TempDir(), FlatcarImage: "/nonexistent/flatcar_production_qemu_image.img"})
	if err == nil || !strings.Contains(err.Error(), "make flatcar-image") {
		t.Fatalf("error %v does not say what to do", err)
	}
}
