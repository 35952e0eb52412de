package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/krew/pkg/constants"
	"sigs.k8s.io/krew/pkg/index"
	"sigs.k8s.io/yaml"
)

// KrewFile is the krew plugin manifest (`kubectl krew install --manifest=slipway.yaml
// --archive=kubectl-slipway_V_OS_ARCH.tar.gz` installs from the release; the same file goes to a krew
// index).
const KrewFile = "slipway.yaml"

// KrewPlugin is the plugin's name: krew installs it as kubectl-slipway, `kubectl slipway`.
const KrewPlugin = "slipway"

// KrewManifest is the krew plugin manifest for the kubectl-slipway archives written to out: one
// platform per archive, its URI under c.Download, its SHA-256 read from the archive itself.
func KrewManifest(c Config, out string) ([]byte, error) {
	p := index.Plugin{
		TypeMeta:   metav1.TypeMeta{APIVersion: constants.CurrentAPIVersion, Kind: constants.PluginKind},
		ObjectMeta: metav1.ObjectMeta{Name: KrewPlugin},
		Spec: index.PluginSpec{
			Version:          c.Version,
			Homepage:         "https://github.com/slipway-dev/slipway",
			ShortDescription: "Status, pause and resume of Flatcar reboots coordinated by Slipway",
			Description: "Shows the fleet's reboot state as Slipway's operator sees it: problems first, the leader,\n" +
				"pause switches, reboot windows, blockers, budgets, OS versions and their canaries, and why\n" +
				"each node waits. Pauses and resumes the fleet, a budget group, a halted OS version.\n",
			Caveats: "Needs read access to Nodes, Leases and ConfigMap slipway-fleet in the operator's\n" +
				"namespace (-n, default slipway-system); pause/resume patch that ConfigMap.\n",
		},
	}
	for _, b := range Binaries {
		if b.Name != "kubectl-slipway" {
			continue
		}
		for _, pl := range b.Platforms {
			archive := ArchiveName(b.Name, c.Version, pl)
			data, err := os.ReadFile(filepath.Join(out, archive))
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(data)
			goos, goarch, _ := strings.Cut(pl, "/")
			p.Spec.Platforms = append(p.Spec.Platforms, index.Platform{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": goos, "arch": goarch}},
				URI:      fmt.Sprintf("%s/%s/%s", strings.TrimRight(c.Download, "/"), c.Version, archive),
				Sha256:   hex.EncodeToString(sum[:]),
				Files:    []index.FileOperation{{From: b.Name, To: "."}, {From: "LICENSE", To: "."}},
				Bin:      b.Name,
			})
		}
	}
	y, err := yaml.Marshal(p)
	if err != nil {
		return nil, err
	}
	// metav1.ObjectMeta marshals an unset creation time as null; krew's own manifests leave it out.
	return bytes.Replace(y, []byte("  creationTimestamp: null\n"), nil, 1), nil
}
