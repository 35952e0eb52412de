#!/usr/bin/env bash
# Installs what the local QEMU e2e cluster needs on a Debian machine: QEMU, qemu-img, mmdebstrap,
# e2fsprogs and a Debian kernel + initrd in /boot for the guests (~90 s: the kernel package builds its
# initrd). Idempotent.
set -euo pipefail
"$(dirname "$0")/install-deps.sh"
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v qemu-img >/dev/null || need+=(qemu-utils)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v curl >/dev/null || need+=(curl ca-certificates)   # make flatcar-image
ls /boot/vmlinuz-* >/dev/null 2>&1 || need+=(linux-image-amd64)
if [ ${#need[@]} -gt 0 ]; then
  echo "[install-e2e-deps] installing ${need[*]} with apt-get (~90 s)" >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
