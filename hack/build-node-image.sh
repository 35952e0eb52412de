#!/usr/bin/env bash
# Builds the e2e node image offline: Debian bookworm from the machine's apt mirror (mmdebstrap) with
# systemd, dbus, containerd, runc and the CNI plugins; the kubelet built from the Go module proxy at the
# control plane's Kubernetes version; Slipway's update_engine stand-in as update-engine.service on the
# system bus; Flatcar-shaped /etc/os-release and update.conf; the Slipway and pause images ready for
# `ctr images import`. Guests boot the host's Debian kernel with -kernel/-initrd, so its modules are
# copied in. Per-VM identity (hostname, machine-id, kubeconfig) comes at boot, not from the image.
#
# Cached: the package rootfs by its package list, the finished image by the hash of every input, so an
# unchanged rebuild takes a second. Prints the image path on its last line; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE_ROOT="${SLIPWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slipway}"
OUT="$CACHE_ROOT/node-image"
mkdir -p "$OUT"
start=$(date +%s)
log() { printf '[build-node-image +%ss] %s\n' "$(( $(date +%s) - start ))" "$*" >&2; }

for tool in mmdebstrap mkfs.ext4 qemu-system-x86_64 qemu-img; do
  command -v "$tool" >/dev/null || { echo "$tool missing: run hack/install-e2e-deps.sh (apt: mmdebstrap e2fsprogs qemu-system-x86 qemu-utils linux-image-amd64)" >&2; exit 1; }
done
KERNEL=$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n1 || true)
[ -n "$KERNEL" ] || { echo "no /boot/vmlinuz-*: apt-get install linux-image-amd64" >&2; exit 1; }
KVER=${KERNEL#/boot/vmlinuz-}

# 1. Inputs built from this repository and the Go proxy.
CP=$(hack/build-controlplane.sh kubelet)
mkdir -p "$OUT/inputs"
inputs=$(cd "$OUT/inputs" && pwd) # absolute: one build below runs in e2e/
log "building static binaries (agent, operator, stand-in, pause, ociimage)"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/slipway-dev/slipway/internal/version.Version=e2e" \
  -o "$inputs/" ./agent/cmd/update-agent ./operator/cmd/update-operator
# The stand-in, pause and the e2e hook are test machinery: the e2e module's.
CGO_ENABLED=0 go build -C e2e -trimpath -ldflags "-s -w" -o "$inputs/" ./cmd/slipway-standin ./cmd/pause ./cmd/e2e-hook
# hack/ociimage is a module of its own (its image library is no dependency of the product).
CGO_ENABLED=0 go build -C hack/ociimage -trimpath -o "$inputs/" .
"$inputs/ociimage" -name docker.io/library/slipway:e2e -out "$inputs/slipway.tar" -entrypoint /update-operator \
  /update-agent="$inputs/update-agent" /update-operator="$inputs/update-operator"
"$inputs/ociimage" -name registry.k8s.io/pause:3.10 -out "$inputs/pause.tar" -entrypoint /pause /pause="$inputs/pause"
"$inputs/ociimage" -name docker.io/library/slipway-e2e-hook:e2e -out "$inputs/hook.tar" -entrypoint /e2e-hook /e2e-hook="$inputs/e2e-hook"

PACKAGES="systemd,systemd-sysv,dbus,udev,kmod,iproute2,iptables,containerd,runc,containernetworking-plugins,ca-certificates,procps,util-linux,mount,conntrack,ethtool,qemu-guest-agent"
# 2. The package rootfs, cached by package list. Its CNI plugins (static Go binaries) also go to
#    inputs/cni for Flatcar nodes, whose Ignition fetches them from the harness.
base="$OUT/base-$(echo "$PACKAGES" | sha256sum | cut -c1-12).tar"
if [ ! -f "$base" ]; then
  log "mmdebstrap bookworm ($PACKAGES) — ~30-90 s"
  mmdebstrap --format=tar --variant=minbase --include="$PACKAGES" bookworm "$base.tmp" >&2
  mv "$base.tmp" "$base"
fi
if [ ! -x "$inputs/cni/bridge" ]; then
  rm -rf "$inputs/cni" "$inputs/cni.tmp" && mkdir -p "$inputs/cni.tmp"
  tar -C "$inputs/cni.tmp" -xf "$base" ./usr/lib/cni
  mv "$inputs/cni.tmp/usr/lib/cni" "$inputs/cni" && rm -rf "$inputs/cni.tmp"
fi

key=$( { cat "$0" e2e/harness/nodefiles/*; echo "$PACKAGES $KVER"; sha256sum "$CP/kubelet" "$inputs/slipway-standin" "$inputs/slipway.tar" "$inputs/pause.tar" "$inputs/hook.tar" | cut -d' ' -f1; } | sha256sum | cut -c1-16)
IMAGE="$OUT/node-$key.raw"
if [ -f "$IMAGE" ]; then
  log "cached: $IMAGE"
  echo "$IMAGE"
  exit 0
fi

work=$(mktemp -d "$OUT/work.XXXX")
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root"
log "unpacking rootfs"
tar -C "$root" -xf "$base"

# 3. Kernel modules of the kernel the guests boot.
log "copying modules of $KVER"
mkdir -p "$root/lib/modules"
cp -a "/lib/modules/$KVER" "$root/lib/modules/"

# 4. Flatcar's shape: os-release, update.conf, update_engine on the bus, no locksmithd.
rm -f "$root/etc/os-release"
cat > "$root/etc/os-release" <<'OSR'
NAME="Flatcar Container Linux by Kinvolk"
ID=flatcar
ID_LIKE=coreos
VERSION=4459.2.1
VERSION_ID=4459.2.1
BUILD_ID=slipway-e2e
PRETTY_NAME="Flatcar Container Linux by Kinvolk 4459.2.1 (Slipway e2e stand-in on Debian)"
OSR
mkdir -p "$root/usr/share/flatcar" "$root/etc/flatcar"
printf 'GROUP=stable\nSERVER=https://public.update.flatcar-linux.net/v1/update/\n' > "$root/usr/share/flatcar/update.conf"
printf 'GROUP=stable\n' > "$root/etc/flatcar/update.conf"   # the node's own; node-config apply leaves it
install -m 0755 "$inputs/slipway-standin" "$root/usr/local/bin/slipway-standin"
install -m 0755 "$inputs/update-agent" "$root/usr/local/bin/update-agent"
install -m 0755 "$CP/kubelet" "$root/usr/local/bin/kubelet"
cat > "$root/etc/dbus-1/system.d/com.coreos.update1.conf" <<'DBUS'
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <policy user="root">
    <allow own="com.coreos.update1"/>
  </policy>
  <policy context="default">
    <allow send_destination="com.coreos.update1"/>
    <allow receive_sender="com.coreos.update1"/>
  </policy>
</busconfig>
DBUS
unit() { cat > "$root/etc/systemd/system/$1"; }
unit update-engine.service <<'U'
[Unit]
Description=update_engine stand-in (com.coreos.update1)
Requires=dbus.service
After=dbus.service
[Service]
Type=dbus
BusName=com.coreos.update1
# The update server offers beta and lts releases of their own, so a channel change stages another
# version than the one the node runs (stable's 9999.0.0, which earlier scenarios rebooted into).
ExecStart=/usr/local/bin/slipway-standin --offer=beta=9999.1.0,lts=9999.2.0
Restart=always
[Install]
WantedBy=multi-user.target
U
# What an unconverted Flatcar node runs: locksmithd (a vendor unit in /usr/lib, as on Flatcar), which
# would reboot on its own. Here a stand-in that only sleeps; the harness converts every node with
# `update-agent node-config apply` and the
# snippet butane/snippets/flatcar-slipway.ign, as a user converts an existing fleet.
cat > "$root/usr/lib/systemd/system/locksmithd.service" <<'U'
[Unit]
Description=locksmithd stand-in (reboot manager Slipway replaces)
[Service]
ExecStart=/bin/sleep infinity
[Install]
WantedBy=multi-user.target
U
unit slipway-fwcfg.service <<'U'
[Unit]
Description=Per-node kubelet credentials from QEMU fw_cfg
Before=kubelet.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'modprobe qemu_fw_cfg; mkdir -p /etc/kubernetes; cp /sys/firmware/qemu_fw_cfg/by_name/opt/slipway/kubeconfig/raw /etc/kubernetes/kubelet.conf'
[Install]
WantedBy=multi-user.target
U
unit kubelet.service <<'U'
[Unit]
Description=kubelet
Requires=containerd.service slipway-fwcfg.service slipway-images.service
After=containerd.service slipway-fwcfg.service slipway-images.service network-online.target
Wants=network-online.target
[Service]
ExecStart=/usr/local/bin/kubelet --config=/etc/kubernetes/kubelet-config.yaml --kubeconfig=/etc/kubernetes/kubelet.conf
Restart=always
RestartSec=2
[Install]
WantedBy=multi-user.target
U
mkdir -p "$root/opt/slipway/images" "$root/etc/kubernetes" "$root/etc/cni/net.d" "$root/etc/systemd/network"
cp "$inputs/slipway.tar" "$inputs/pause.tar" "$inputs/hook.tar" "$root/opt/slipway/images/"
# Shared with Flatcar nodes (their Ignition embeds the same files): kubelet, containerd, CNI config and
# the boot counter and image import units.
NF=e2e/harness/nodefiles
sed 's|@RESOLV_CONF@|/etc/resolv.conf|' "$NF/kubelet-config.yaml" > "$root/etc/kubernetes/kubelet-config.yaml"
cp "$NF/containerd-config.toml" "$root/etc/containerd/config.toml"
cp "$NF/10-slipway.conflist" "$root/etc/cni/net.d/10-slipway.conflist"
cp "$NF/boot-counter.service" "$NF/slipway-images.service" "$root/etc/systemd/system/"
mkdir -p "$root/opt/cni" && rm -rf "$root/opt/cni/bin" && ln -s /usr/lib/cni "$root/opt/cni/bin"   # Debian's plugins where Flatcar's go
printf '[Match]\nName=e*\n[Network]\nDHCP=yes\n' > "$root/etc/systemd/network/10-e.network"
printf 'overlay\nbr_netfilter\nqemu_fw_cfg\n' > "$root/etc/modules-load.d/k8s.conf"
printf 'net.ipv4.ip_forward=1\nnet.bridge.bridge-nf-call-iptables=1\n' > "$root/etc/sysctl.d/k8s.conf"
printf '/dev/vda / ext4 rw,noatime 0 1\n' > "$root/etc/fstab"
printf 'nameserver 10.0.2.3\n' > "$root/etc/resolv.conf.slipway"
: > "$root/etc/machine-id"   # generated at first boot: every VM gets its own
for u in update-engine boot-counter slipway-fwcfg slipway-images kubelet systemd-networkd containerd; do
  ln -sf "/etc/systemd/system/$u.service" "$root/etc/systemd/system/multi-user.target.wants/$u.service" 2>/dev/null || true
done
ln -sf /lib/systemd/system/systemd-networkd.service "$root/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
ln -sf /usr/lib/systemd/system/locksmithd.service "$root/etc/systemd/system/multi-user.target.wants/locksmithd.service"
ln -sf /lib/systemd/system/containerd.service "$root/etc/systemd/system/multi-user.target.wants/containerd.service"
chroot "$root" passwd -d root >/dev/null 2>&1 || true

log "writing ext4 image (mkfs.ext4 -d, no loop mount)"
truncate -s 3G "$IMAGE.tmp"
mkfs.ext4 -q -F -L root -d "$root" "$IMAGE.tmp"
mv "$IMAGE.tmp" "$IMAGE"
cp "$KERNEL" "$OUT/vmlinuz"
cp "/boot/initrd.img-$KVER" "$OUT/initrd.img"
# Keep only the newest images.
ls -1t "$OUT"/node-*.raw | tail -n +3 | xargs -r rm -f
log "done: $IMAGE"
echo "$IMAGE"
