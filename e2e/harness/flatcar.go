package harness

import (
	"context"
	"crypto/sha512"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_4/types"
	"github.com/vincent-petithory/dataurl"
	"k8s.io/klog/v2"

	"github.com/slipway-dev/slipway/internal/httpserve"
)

// Booting a real Flatcar image (FLATCAR_IMAGE=path to flatcar_production_qemu_image.img, e.g. from
// `make flatcar-image`): the image boots from its own disk (GRUB, Flatcar's kernel, real
// update_engine, real locksmithd) and Ignition configures it from fw_cfg
// opt/org.flatcar-linux/config. The per-node Ignition merges butane/snippets/flatcar-slipway.ign (the
// snippet users get) and adds what the e2e cluster needs: hostname, the kubelet's credentials and
// config, containerd config and CNI, and the binaries and images, which Ignition fetches from the
// harness over slirp (http://10.0.2.2:PORT), verified by SHA-512 — no internet, no sysext download.

// FlatcarFwCfgKey is where Flatcar's Ignition looks for its config on QEMU.
const FlatcarFwCfgKey = "opt/org.flatcar-linux/config"

// FlatcarAgentPath is where the per-node Ignition puts update-agent (/usr is read-only on Flatcar).
const FlatcarAgentPath = "/opt/bin/update-agent"

// served are the files Ignition fetches from the harness: name in the HTTP root -> path on the node.
var served = []struct{ name, dest string }{
	{"kubelet", "/opt/bin/kubelet"},
	{"update-agent", FlatcarAgentPath},
	{"cni/bridge", "/opt/cni/bin/bridge"},
	{"cni/host-local", "/opt/cni/bin/host-local"},
	{"cni/portmap", "/opt/cni/bin/portmap"},
	{"cni/loopback", "/opt/cni/bin/loopback"},
	{"slipway.tar", "/opt/slipway/images/slipway.tar"},
	{"pause.tar", "/opt/slipway/images/pause.tar"},
	{"hook.tar", "/opt/slipway/images/hook.tar"},
}

// FlatcarNode is what differs between Flatcar nodes.
type FlatcarNode struct {
	Name       string
	Kubeconfig string // the kubelet's kubeconfig (server https://10.0.2.2:PORT)
}

// FlatcarServed is what every Flatcar node's Ignition fetches: the base URL of the harness's file
// server (e.g. http://10.0.2.2:PORT/) and the SHA-512 of each file in served, hashed once for all nodes.
type FlatcarServed struct {
	Base   string
	SHA512 map[string]string
}

// HashServed hashes the files in dir (laid out by FlatcarFiles) that are served at base.
func HashServed(dir, base string) (FlatcarServed, error) {
	fs := FlatcarServed{Base: base, SHA512: map[string]string{}}
	for _, s := range served {
		b, err := os.ReadFile(filepath.Join(dir, s.name))
		if err != nil {
			return fs, fmt.Errorf("file for the Flatcar nodes: %w", err)
		}
		sum := sha512.Sum512(b)
		fs.SHA512[s.name] = hex.EncodeToString(sum[:])
	}
	return fs, nil
}

// FlatcarIgnition renders one node's Ignition (spec 3.4). snippet is flatcar-slipway.ign.
func FlatcarIgnition(node FlatcarNode, snippet []byte, files FlatcarServed) ([]byte, error) {
	str := func(s string) *string { return &s }
	yes := true
	inline := func(path, contents string, mode int) types.File {
		return types.File{
			Node:          types.Node{Path: path, Overwrite: &yes},
			FileEmbedded1: types.FileEmbedded1{Mode: &mode, Contents: types.Resource{Source: str(dataurl.EncodeBytes([]byte(contents)))}},
		}
	}
	cfg := types.Config{Ignition: types.Ignition{
		Version: "3.4.0",
		Config:  types.IgnitionConfig{Merge: []types.Resource{{Source: str(dataurl.EncodeBytes(snippet))}}},
	}}
	cfg.Storage.Files = append(cfg.Storage.Files,
		inline("/etc/hostname", node.Name+"\n", 0o644),
		inline("/etc/kubernetes/kubelet.conf", node.Kubeconfig, 0o600),
		inline("/etc/kubernetes/kubelet-config.yaml", nodeFile("kubelet-config.yaml"), 0o644),
		inline("/etc/containerd/config.toml", nodeFile("containerd-config.toml"), 0o644),
		inline("/etc/cni/net.d/10-slipway.conflist", nodeFile("10-slipway.conflist"), 0o644),
		inline("/etc/modules-load.d/k8s.conf", "overlay\nbr_netfilter\n", 0o644),
		inline("/etc/sysctl.d/k8s.conf", "net.ipv4.ip_forward=1\nnet.bridge.bridge-nf-call-iptables=1\n", 0o644),
	)
	for _, s := range served {
		sum, ok := files.SHA512[s.name]
		if !ok {
			return nil, fmt.Errorf("%s for the Flatcar node was not hashed (HashServed)", s.name)
		}
		mode := 0o755
		if strings.HasSuffix(s.name, ".tar") {
			mode = 0o644
		}
		u, err := url.JoinPath(files.Base, s.name)
		if err != nil {
			return nil, err
		}
		cfg.Storage.Files = append(cfg.Storage.Files, types.File{
			Node: types.Node{Path: s.dest, Overwrite: &yes},
			FileEmbedded1: types.FileEmbedded1{Mode: &mode, Contents: types.Resource{
				Source: str(u), Verification: types.Verification{Hash: str("sha512-" + sum)},
			}},
		})
	}
	unit := func(name, contents string) types.Unit {
		return types.Unit{Name: name, Enabled: &yes, Contents: str(contents)}
	}
	cfg.Systemd.Units = append(cfg.Systemd.Units,
		types.Unit{Name: "containerd.service", Enabled: &yes, Dropins: []types.Dropin{{
			Name: "10-slipway.conf", Contents: str("[Service]\nEnvironment=CONTAINERD_CONFIG=/etc/containerd/config.toml\n"),
		}}},
		unit("boot-counter.service", nodeFile("boot-counter.service")),
		unit("slipway-images.service", nodeFile("slipway-images.service")),
		unit("kubelet.service", `[Unit]
Description=kubelet
Requires=containerd.service slipway-images.service
After=containerd.service slipway-images.service network-online.target
Wants=network-online.target
[Service]
ExecStart=/opt/bin/kubelet --config=/etc/kubernetes/kubelet-config.yaml --kubeconfig=/etc/kubernetes/kubelet.conf
Restart=always
RestartSec=2
[Install]
WantedBy=multi-user.target
`),
	)
	return json.MarshalIndent(cfg, "", "  ")
}

// nodeFiles are the files every e2e node gets, Debian or Flatcar (hack/build-node-image.sh copies
// the same directory into the Debian image).
//
//go:embed nodefiles
var nodeFiles embed.FS

func nodeFile(name string) string {
	b, err := nodeFiles.ReadFile("nodefiles/" + name)
	if err != nil {
		panic(err) // embedded at build time: cannot be missing
	}
	return strings.ReplaceAll(string(b), "@RESOLV_CONF@", "/run/systemd/resolve/resolv.conf")
}

// FlatcarFiles gathers what Ignition fetches into dir: the inputs of hack/build-node-image.sh
// (update-agent, the image tars) and the kubelet, plus the CNI plugins from the node image's Debian
// package (static Go binaries).
func FlatcarFiles(dir, inputs, kubelet, cniDir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "cni"), 0o755); err != nil {
		return err
	}
	for _, s := range served {
		src := filepath.Join(inputs, s.name)
		switch {
		case s.name == "kubelet":
			src = kubelet
		case strings.HasPrefix(s.name, "cni/"):
			src = filepath.Join(cniDir, strings.TrimPrefix(s.name, "cni/"))
		}
		if _, err := os.Stat(src); err != nil {
			return fmt.Errorf("%s for the Flatcar nodes: %w", s.name, err)
		}
		dst := filepath.Join(dir, s.name)
		_ = os.Remove(dst)
		if err := os.Symlink(src, dst); err != nil {
			return err
		}
	}
	return nil
}

// serveFiles serves dir on the host's loopback; guests reach it as 10.0.2.2:port.
func serveFiles(dir string) (port int, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Whole OS images over slow emulated NICs: no write timeout.
	limits := httpserve.DefaultLimits
	limits.WriteTimeout = 0
	httpserve.ServeWith(ctx, l, http.FileServer(http.Dir(dir)), klog.Background().WithName("flatcar-files"), limits)
	return l.Addr().(*net.TCPAddr).Port, cancel, nil
}

// imageFormat asks qemu-img what a disk image is (Flatcar's QEMU image is qcow2).
func imageFormat(path string) (string, error) {
	out, err := exec.Command("qemu-img", "info", "--output=json", path).Output()
	if err != nil {
		return "", fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	var info struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return "", err
	}
	return info.Format, nil
}
