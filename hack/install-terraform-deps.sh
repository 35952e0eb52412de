#!/usr/bin/env bash
# What the terraform/ tests and `make cluster BACKEND=terraform` need on a Debian machine: libvirt
# (daemon + virsh) and QEMU from apt, and terraform itself (if none is on PATH, v1.5.7 is built from
# the Go module proxy into ~/.cache/slipway/terraform/bin: the Terraform registry and releases site
# are not reachable here). Idempotent.
set -euo pipefail
"$(dirname "$0")/install-e2e-deps.sh"
need=()
command -v libvirtd >/dev/null || need+=(libvirt-daemon-system)
command -v virsh >/dev/null || need+=(libvirt-clients)
command -v dnsmasq >/dev/null || [ -x /usr/sbin/dnsmasq ] || need+=(dnsmasq-base)   # libvirt NAT networks
if [ ${#need[@]} -gt 0 ]; then
  echo "[install-terraform-deps] installing ${need[*]} with apt-get (~10 s)" >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null || {
    # Without systemd as PID 1 the packages' service start fails; the binaries are installed.
    command -v libvirtd >/dev/null && command -v virsh >/dev/null
  }
fi
if ! command -v terraform >/dev/null; then
  CACHE_ROOT="${SLIPWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slipway}"
  if [ ! -x "$CACHE_ROOT/terraform/bin/terraform" ]; then
    echo "[install-terraform-deps] no terraform on PATH: building v1.5.7 from the Go proxy into $CACHE_ROOT/terraform/bin (~3 min)" >&2
    GOBIN="$CACHE_ROOT/terraform/bin" CGO_ENABLED=0 go install github.com/hashicorp/terraform@v1.5.7
  fi
fi
